"""Choosing a run's model at launch (the API's "model", the form's select): only what this server can run."""
from __future__ import annotations

import pytest

from dag.models import Node, Session
from dag.runs.model_choice import ModelProblem, available_models, clean_model

from ..launch_helpers import wait_for_end

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("offline_models")]


@pytest.fixture
def no_run(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        yield


def launch(api, **body):
    return api.post("/api/sessions/", {"function": "wiki_agent", "args": {"question": "How does the guard work?"},
                                       **body}, format="json")


def test_offline_the_server_offers_the_two_simulated_models(api):
    assert [spec for spec, _ in available_models()] == ["sim", "sim:naive"]
    assert [m["model"] for m in api.get("/api/models/").json()] == ["sim", "sim:naive"]


def test_a_provider_with_its_key_set_is_offered(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert "anthropic:claude-sonnet-4-5" in [spec for spec, _ in available_models()]


@pytest.mark.django_db(transaction=True)  # committed: the executor runs it, its heartbeat sees the session
def test_choosing_sim_naive_for_wiki_agent_recurses_into_the_ceiling(api):
    response = launch(api, model="sim:naive")
    assert response.status_code == 201 and response.json()["model"] == "sim:naive"
    session = wait_for_end(Session.objects.get())
    assert session.status == "error" and "exceeded max nesting depth 5" in session.error
    assert Node.objects.filter(session=session, status="refused", name="wiki_agent").count() == 2


def test_without_a_choice_the_server_default_is_recorded(api, no_run):
    assert launch(api).json()["model"] == "sim"


@pytest.mark.parametrize("model, words", [
    ("openai:gpt-4o-mini", "provider 'openai' is not set up on this server; it offers sim, sim:naive"),
    ("tests.web.launch_helpers.HangingProvider:x", "provider 'tests.web.launch_helpers.HangingProvider' is not set up"),
    ("gpt-4o", "names no provider"),
    ("sim:whatever", "model 'sim:whatever' is not offered on this server"),
    (42, "must be a model name"),
    ("x" * 201, "at most 200 characters"),
])
def test_an_unknown_or_unavailable_model_is_a_400(api, no_run, model, words):
    response = launch(api, model=model)
    assert response.status_code == 400 and list(response.json()) == ["model"]
    assert words in response.json()["model"][0]
    assert not Session.objects.exists()


def test_a_provider_model_is_offered_only_as_its_default_or_when_the_operator_lists_it(api, no_run, monkeypatch,
                                                                                      settings):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert launch(api, model="openai:gpt-4o-mini").json()["model"] == "openai:gpt-4o-mini"
    refused = launch(api, model="openai:llama3.1:8b")
    assert refused.status_code == 400 and "not offered on this server" in refused.json()["model"][0]
    settings.OPENPROGRAM_MODELS = "openai:llama3.1:8b,anthropic:claude-haiku-4-5"  # anthropic: no key here
    assert launch(api, model="openai:llama3.1:8b").json()["model"] == "openai:llama3.1:8b"
    # With a provider's URL set and no OPENPROGRAM_MODEL, that provider's default model is the server's,
    # offered once, by its full name; the provider's name alone means it too.
    assert [m["model"] for m in api.get("/api/models/").json()] == [
        "openai:gpt-4o-mini", "sim", "sim:naive", "openai:llama3.1:8b"]
    assert launch(api, model="openai").json()["model"] == "openai:gpt-4o-mini"


def test_the_form_offers_the_models_and_run_again_keeps_the_choice_and_names_the_session(logged_in, no_run):
    page = logged_in.get("/functions/wiki_agent/").content.decode()
    assert '<option value="sim:naive">sim:naive</option>' in page and "not LLMs" in page
    response = logged_in.post("/functions/wiki_agent/", {"question": "q", "mode": "brief", "budget-model": "sim:naive"})
    session = Session.objects.get()
    assert response.status_code == 302 and session.model == "sim:naive"
    again = logged_in.get(f"/functions/wiki_agent/?from={session.pk}").content.decode()
    assert '<option value="sim:naive" selected>' in again
    assert f"Running again: session <a href=\"/sessions/{session.pk}/\">{session.pk}</a>" in again


def test_the_form_refuses_a_model_it_does_not_offer(logged_in):
    response = logged_in.post("/functions/wiki_agent/", {"question": "q", "mode": "brief",
                                                         "budget-model": "openai:gpt-4o-mini"})
    assert response.status_code == 400 and "budget-model" in response.content.decode()
    assert "model" in response.context["options"].errors and not Session.objects.exists()


@pytest.mark.parametrize("spec", ["\ud800", "\ud83d", " \udfff ", "sim:\udc00"])
def test_a_model_name_that_is_not_unicode_is_refused_naming_it_and_what_is_offered(spec):
    with pytest.raises(ModelProblem) as caught:
        clean_model(spec)
    message = str(caught.value)
    message.encode("utf-8")  # it can be sent
    assert message == (f"model name {spec!r} is not valid Unicode: it holds a lone surrogate (half of a UTF-16 "
                       f"pair); send whole characters; this server offers sim, sim:naive")


def test_the_form_refuses_a_model_name_that_is_not_utf8_beside_its_field(logged_in):
    # A form body cannot carry a lone surrogate: Django reads undecodable bytes as U+FFFD, which is not offered.
    response = logged_in.post("/functions/wiki_agent/", "question=q&mode=brief&budget-model=%ED%A0%80",
                              content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and list(response.context["options"].errors) == ["model"]
    assert not Session.objects.exists()


def test_a_provider_listed_alone_in_openprogram_models_is_offered_once_as_its_default_model(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings.OPENPROGRAM_MODELS = "openai,scripted"
    monkeypatch.setenv("OPENPROGRAM_MODEL", "scripted:a")  # so that the scripted provider is set up too
    offered = [spec for spec, _ in available_models()]
    assert offered.count("openai:gpt-4o-mini") == 1 and "openai" not in offered
    assert "scripted:scripted" in offered and clean_model("scripted") == "scripted:scripted"
