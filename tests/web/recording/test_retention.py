"""Retention: ended sessions older than the cut-off are deleted with their nodes, in batches, by the
reaper's pass (OPENPROGRAM_RETENTION_DAYS) and by `manage.py prune_sessions`; queued and running ones,
and recent ones, stay, whoever owns them."""
import io
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from dag.models import Node, Session
from dag.recording import retention
from dag.runs import reaper
from dag.runs.reaper import Reachability

from .test_stored_size import recorded

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


def aged(session: Session, days: float) -> Session:
    """`session` as if it had ended (or, if it has not, been created) `days` ago."""
    then = timezone.now() - timedelta(days=days)
    Session.objects.filter(pk=session.pk).update(created_at=then, finished_at=then if session.is_terminal else None)
    return Session.objects.get(pk=session.pk)


@pytest.fixture
def history(user, other_user):
    """Old and recent ended sessions of two users, and old ones still queued and running."""
    old = [aged(recorded(user), 40), aged(recorded(other_user), 40),
           aged(recorded(user, end=Session.Status.ERROR), 31)]
    kept = [aged(recorded(user), 29), aged(recorded(other_user, end=None), 40),
            aged(Session.objects.create(owner=user, function="entry"), 40)]
    return old, kept


def assert_only_kept(old, kept):
    assert not Session.objects.filter(pk__in=[s.pk for s in old]).exists()
    assert not Node.objects.filter(session_id__in=[s.pk for s in old]).exists()
    assert set(Session.objects.values_list("pk", flat=True)) == {s.pk for s in kept}


def test_prune_deletes_ended_sessions_older_than_the_cutoff_in_batches(history, monkeypatch):
    old, kept = history
    monkeypatch.setattr(retention, "BATCH", 2)
    pruned = retention.prune(timezone.now() - timedelta(days=30))
    assert (pruned.sessions, pruned.nodes) == (3, 9)
    assert pruned.bytes == sum(s.stored_bytes for s in old)
    assert_only_kept(old, kept)


def test_the_reapers_pass_applies_retention_days_and_zero_keeps_everything(settings, history):
    old, kept = history
    settings.OPENPROGRAM_RETENTION_DAYS = 0
    reaper.one_pass(Reachability())
    assert Session.objects.count() == len(old) + len(kept)

    settings.OPENPROGRAM_RETENTION_DAYS = 30
    reaper.one_pass(Reachability())
    assert_only_kept(old, kept)


def test_prune_sessions_says_what_it_deletes_and_a_dry_run_deletes_nothing(history):
    old, kept = history
    size = sum(s.stored_bytes for s in old)
    out = io.StringIO()
    call_command("prune_sessions", "--older-than", "30d", "--dry-run", stdout=out)
    assert f"Would delete 3 session(s), 9 node(s), {size} byte(s)" in out.getvalue()
    assert Session.objects.count() == len(old) + len(kept)

    out = io.StringIO()
    call_command("prune_sessions", "--older-than", "720h", stdout=out)
    assert f"Deleted 3 session(s), 9 node(s), {size} byte(s)" in out.getvalue()
    assert_only_kept(old, kept)


@pytest.mark.parametrize("age", ["30 days", "-1d", "d", "30w"])
def test_a_wrong_age_is_named_with_the_form_it_takes(age):
    with pytest.raises(CommandError, match="--older-than must be .* such as 30d"):
        call_command("prune_sessions", f"--older-than={age}")


@pytest.mark.parametrize("age, problem", [("1e5d", "such as 30d"), ("3000000d", "at most 36500d"),
                                          ("99999999999d", "at most 36500d")])
def test_a_wrong_age_on_the_command_line_is_a_usage_error_not_a_traceback(age, problem):
    # Parsing happens before Django's handler of CommandError: one raised there was a traceback, and an age
    # too long ago for a date an OverflowError.
    done = subprocess.run([sys.executable, "manage.py", "prune_sessions", f"--older-than={age}", "--dry-run"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--older-than must be" in done.stderr and problem in done.stderr, done.stderr
