"""`manage.py interrupt_orphaned_runs`: at server start, end sessions whose process died as `interrupted`."""
from django.core.management.base import BaseCommand

from dag.runs.lifecycle import interrupt_orphaned_sessions


class Command(BaseCommand):
    help = ("Mark queued and running sessions as interrupted. Run it when starting the embedded server, "
            "before any run starts: with the in-process executor, no earlier run can still be alive.")

    def handle(self, *args, **options):
        count = interrupt_orphaned_sessions()
        if count:
            self.stdout.write(f"Marked {count} session(s) left over from a previous server as interrupted.")
