"""Fork: a new run of a session from one of its model calls: the calls before it served from the record,
that call answered with an edited reply (or live with another model), every call after it live."""
from __future__ import annotations

import pytest

from dag.models import Session

from .replays import llm_nodes, recorded, started_from

pytestmark = pytest.mark.django_db(transaction=True)


def fork(api, original: Session, **body) -> Session:
    return started_from(api, f"/api/sessions/{original.pk}/fork/", body)


def test_a_fork_with_an_edited_reply_serves_the_calls_before_and_runs_the_rest_live(
        api, user, debug_functions, provider_calls):
    original = recorded(user, "two_questions")
    first, second = llm_nodes(original)
    made = len(provider_calls)
    forked = fork(api, original, node=first.seq, reply="EDITED")
    assert forked.status == "completed" and forked.result[0] == "EDITED"
    assert len(provider_calls) == made + 1  # the call after the fork point, live
    assert "EDITED" in str(provider_calls[-1].messages)  # ...asked with the edited answer
    fork_first, fork_second = llm_nodes(forked)
    assert fork_first.output["text"] == "EDITED" and not fork_first.replayed and not fork_second.replayed
    assert (forked.forked_from_id, forked.forked_from_node) == (original.pk, first.seq)
    assert api.get(f"/api/sessions/{forked.pk}/").json()["forked_from"] == {"session": str(original.pk),
                                                                           "node": first.seq}


def test_the_calls_before_the_fork_point_are_served_from_the_record(api, user, debug_functions, provider_calls):
    original = recorded(user, "two_questions")
    first, second = llm_nodes(original)
    made = len(provider_calls)
    forked = fork(api, original, node=second.seq, reply="changed")
    assert len(provider_calls) == made  # the first was served, the second edited: nothing live
    fork_first, fork_second = llm_nodes(forked)
    assert fork_first.replayed and fork_first.output == first.output
    assert forked.result == [original.result[0], "changed"]


def test_a_fork_with_another_model_makes_that_call_live_on_it(api, user, debug_functions, provider_calls):
    original = recorded(user, "two_questions")
    first, _ = llm_nodes(original)
    made = len(provider_calls)
    forked = fork(api, original, node=first.seq, model="sim:naive")
    assert forked.status == "completed" and forked.model == "sim:naive"
    assert len(provider_calls) == made + 2  # the fork point and the call after it, both live
    assert not any(node.replayed for node in llm_nodes(forked))


def test_the_original_page_links_to_its_forks_and_the_fork_back(logged_in, api, user, debug_functions,
                                                                provider_calls):
    original = recorded(user, "two_questions")
    forked = fork(api, original, node=llm_nodes(original)[0].seq, reply="x")
    page = logged_in.get(f"/sessions/{original.pk}/").content.decode()
    assert f'href="/sessions/{forked.pk}/" data-role="fork-link"' in page
    page = logged_in.get(f"/sessions/{forked.pk}/").content.decode()
    assert f'Forked from <a href="/sessions/{original.pk}/">' in page
    assert f"/sessions/compare/?a={original.pk}&amp;b={forked.pk}" in page


@pytest.mark.parametrize("body, field", [
    ({"node": 0, "reply": "x"}, "node"),  # seq 0 is the entry call, not a model call
    ({"node": "1", "reply": "x"}, "node"),
    ({"node": 1}, "reply"),
    ({"node": 1, "reply": "x", "model": "sim"}, "reply"),
    ({"node": 1, "reply": 5}, "reply"),
    ({"node": 1, "model": "nope:x"}, "model"),
])
def test_a_wrong_fork_request_is_named(api, user, debug_functions, provider_calls, body, field):
    original = recorded(user, "two_questions")
    response = api.post(f"/api/sessions/{original.pk}/fork/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert Session.objects.count() == 1
