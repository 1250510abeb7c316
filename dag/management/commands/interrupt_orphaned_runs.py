"""`manage.py interrupt_orphaned_runs`: at start-up, end as `interrupted` the sessions no process will finish."""
from django.core.management.base import BaseCommand

from dag.runs.executors import InProcessExecutor, get_executor
from dag.runs.lifecycle import recover_at_start


class Command(BaseCommand):
    help = ("Mark interrupted the running sessions whose lease expired and, with the in-process executor, "
            "those of a previous server on this host (its process is gone) and every queued session (the "
            "pool it waited in died with that server). Sessions with a live lease are left alone, so it is "
            "safe while Celery workers run sessions; with the in-process executor, run it only before "
            "the one server of this database starts: a queued session of a server still serving would "
            "be interrupted too.")

    def handle(self, *args, **options):
        count = recover_at_start(in_process=isinstance(get_executor(), InProcessExecutor))
        if count:
            self.stdout.write(f"Marked {count} session(s) that no process will finish as interrupted.")
