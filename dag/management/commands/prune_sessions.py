"""`manage.py prune_sessions --older-than 30d [--dry-run]`: delete ended sessions older than that, by hand."""
from __future__ import annotations

import re
from argparse import ArgumentTypeError
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from dag.recording.retention import prune

UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
AGE = re.compile(r"^(\d+(?:\.\d+)?)([dhms]?)$")
# Longer ago than any session: beyond some millions of days the cut-off is no date Python can hold.
MAX_AGE_DAYS = 36500


def parse_age(text: str) -> timedelta:
    """"30d", "12h", "90m", "45s" (a bare number is days) as a timedelta. A wrong one is an
    ArgumentTypeError naming the form: argparse's usage error from the command line (a CommandError from
    `call_command`), where a CommandError raised while parsing would be a traceback."""
    match = AGE.match(text.strip().lower())
    if not match:
        raise ArgumentTypeError(f"--older-than must be a number of days, hours, minutes or seconds such as 30d, "
                                f"12h, 90m or 45s; got {text!r}")
    number, unit = match.groups()
    seconds = float(number) * UNIT_SECONDS[unit or "d"]
    if seconds > MAX_AGE_DAYS * UNIT_SECONDS["d"]:
        raise ArgumentTypeError(f"--older-than must be at most {MAX_AGE_DAYS}d; got {text!r}")
    return timedelta(seconds=seconds)


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
