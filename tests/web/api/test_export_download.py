"""`GET /api/sessions/{id}/export/` is a download: `<function>-<id>.json`, the name made safe for a file."""
from __future__ import annotations

import pytest

from dag.models import Session

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("function, stem", [
    ("slow_count", "slow_count"),
    ('my agent/v2"; rm -rf', "my_agent_v2_rm_-rf"),  # no quote, slash or space reaches the header
    ("..", "session"),
])
def test_export_is_an_attachment_named_after_the_function_and_session(api, user, function, stem):
    session = Session.objects.create(owner=user, function=function)
    response = api.get(f"/api/sessions/{session.pk}/export/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="{stem}-{session.pk}.json"'
    assert response["Content-Type"] == "application/json"
    assert response.json()["session"]["id"] == str(session.pk)
