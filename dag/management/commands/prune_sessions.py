"""`manage.py prune_sessions --older-than 30d [--dry-run]`: delete ended sessions older than that, by hand."""
from __future__ import annotations

import re
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dag.recording.retention import prune

UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
AGE = re.compile(r"^(\d+(?:\.\d+)?)([dhms]?)$")


def parse_age(text: str) -> timedelta:
    """"30d", "12h", "90m", "45s" (a bare number is days) as a timedelta; CommandError naming the form."""
    match = AGE.match(text.strip().lower())
    if not match:
        raise CommandError(f"--older-than must be a number of days, hours, minutes or seconds such as 30d, 12h, "
                           f"90m or 45s; got {text!r}")
    number, unit = match.groups()
    return timedelta(**{UNITS[unit or "d"]: float(number)})


class Command(BaseCommand):
    help = ("Delete ended sessions (completed, error, cancelled, interrupted), with their nodes, that ended "
            "longer ago than --older-than; sessions still queued or running are never deleted. Says how many "
            "sessions, nodes and bytes went. OPENPROGRAM_RETENTION_DAYS does the same at every reaper pass.")

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, metavar="AGE", type=parse_age,
                            help="e.g. 30d (days), 12h, 90m, 45s")
        parser.add_argument("--dry-run", action="store_true", help="only say what would be deleted")

    def handle(self, *args, older_than: timedelta, dry_run: bool, **options):
        cutoff = timezone.now() - older_than
        pruned = prune(cutoff, dry_run=dry_run)
        verb = "Would delete" if dry_run else "Deleted"
        self.stdout.write(f"{verb} {pruned.sessions} session(s), {pruned.nodes} node(s), {pruned.bytes} byte(s) "
                          f"that ended before {cutoff:%Y-%m-%d %H:%M:%S} UTC.")
