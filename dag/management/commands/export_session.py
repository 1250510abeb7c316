"""`python manage.py export_session ID [-o FILE]`: a session's whole DAG as JSON."""
import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from dag.models import Session
from dag.recording.export import export_session


class Command(BaseCommand):
    help = "Write a session and all its nodes (in seq order) as one JSON document."

    def add_arguments(self, parser):
        parser.add_argument("session_id", help="the session's id (a UUID)")
        parser.add_argument("-o", "--output", help="write to this file instead of standard output")

    def handle(self, *args, session_id, output=None, **options):
        try:
            session = Session.objects.get(pk=session_id)
        except (Session.DoesNotExist, ValidationError, ValueError):
            raise CommandError(f"no session with id {session_id!r} (see the admin or /api/sessions/)")
        text = json.dumps(export_session(session), indent=2, ensure_ascii=False, cls=DjangoJSONEncoder)
        if output:
            _write(output, text + "\n")
            self.stderr.write(f"wrote session {session.pk} ({session.node_count} nodes) to {output}")
        else:
            self.stdout.write(text)


def _write(path: str, text: str) -> None:
    """`text` into the file at `path`; CommandError naming the path and the system's reason if it cannot."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}; -o takes a file path in an "
                           f"existing, writable directory") from None
