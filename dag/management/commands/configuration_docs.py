"""`manage.py configuration_docs`: write docs/configuration.md's tables from the tables of settings;
`--check` writes nothing and fails when the page is stale (see dag.configuration_docs)."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from dag.configuration_docs import COMMAND, PAGE, regenerated


class Command(BaseCommand):
    help = "Write docs/configuration.md's tables of settings from the code's tables (--check: only compare)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--check", action="store_true",
                            help="write nothing; exit 1 if the page differs from what would be written")

    def handle(self, *args, check: bool = False, **options) -> None:
        try:
            current = PAGE.read_text()
            fresh = regenerated(current)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if fresh == current:
            self.stdout.write(f"{PAGE.name} is up to date")
        elif check:
            raise CommandError(f"{PAGE.name} differs from the tables of settings; run `{COMMAND}`")
        else:
            PAGE.write_text(fresh)
            self.stdout.write(f"wrote {PAGE}")
