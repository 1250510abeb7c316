"""Choosing a provider from the environment, by name or by dotted path."""
import pytest

from runtime.providers import Provider, ScriptedProvider, SimProvider, provider_class, resolve_model
from runtime.providers.anthropic_provider import AnthropicProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.runtime import Runtime, create_runtime

KEYS = ("OPENPROGRAM_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture
def env(monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


class MyProvider(Provider):
    name = "mine"


def test_sim_is_the_default_with_nothing_set(env):
    runtime = create_runtime()
    assert isinstance(runtime.provider, SimProvider) and runtime.provider.model == "heeding"


@pytest.mark.parametrize("spec, cls, model", [
    ("sim", SimProvider, "heeding"), ("sim:naive", SimProvider, "naive"),
    ("openai:gpt-4o-mini", OpenAIProvider, "gpt-4o-mini"),
    ("anthropic:claude-sonnet-4-5", AnthropicProvider, "claude-sonnet-4-5"),
    ("tests.unit.test_providers_select.MyProvider:m1", MyProvider, "m1"),
])
def test_openprogram_model_picks_the_provider(env, spec, cls, model):
    env.setenv("OPENPROGRAM_MODEL", spec)
    runtime = create_runtime()
    assert type(runtime.provider) is cls
    assert runtime.provider_for()[1] == model


def test_keys_pick_a_real_provider_and_base_urls_are_read(env):
    env.setenv("OPENAI_API_KEY", "k")
    env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    provider = create_runtime().provider
    assert isinstance(provider, OpenAIProvider) and provider.base_url == "http://127.0.0.1:11434/v1"
    env.delenv("OPENAI_API_KEY")
    env.delenv("OPENAI_BASE_URL")
    env.setenv("ANTHROPIC_API_KEY", "k")
    assert isinstance(create_runtime().provider, AnthropicProvider)


def test_a_bare_model_name_uses_the_keyed_provider(env):
    env.setenv("OPENAI_API_KEY", "k")
    assert resolve_model("gpt-4o") == ("openai", "gpt-4o")
    with pytest.raises(ValueError, match="names no provider"):
        resolve_model("gpt-4o", env={})


def test_unknown_providers_are_clear_errors(env):
    with pytest.raises(ValueError, match="could not be loaded"):
        provider_class("nowhere.Provider")
    with pytest.raises(ValueError, match="not a runtime.providers.Provider subclass"):
        provider_class("runtime.runtime.Runtime")
    env.setenv("OPENPROGRAM_MODEL", "nosuch.module.Thing:x")
    with pytest.raises(ValueError, match="could not be loaded"):
        create_runtime().provider


def test_a_provider_instance_or_name_can_be_given(env):
    scripted = ScriptedProvider(["x"])
    assert Runtime(provider=scripted).provider is scripted
    assert Runtime(provider=scripted, model="v2").provider_for()[1] == "v2"
    runtime = Runtime(provider="openai", model="gpt-4.1")
    assert isinstance(runtime.provider, OpenAIProvider) and runtime.provider_for()[1] == "gpt-4.1"


def test_a_missing_model_name_is_named(env):
    provider = OpenAIProvider()
    provider.model = None
    with pytest.raises(ValueError, match="no model name for the openai provider"):
        Runtime(provider=provider).llm("hi")


def test_anthropic_without_a_key_says_which_variable_to_set(env):
    env.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(Exception, match="set ANTHROPIC_API_KEY"):
        Runtime(model="anthropic:claude-sonnet-4-5").llm("hi")


def test_a_model_name_with_a_version_and_a_tag_is_not_taken_for_a_provider_path(env):
    env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    assert resolve_model("llama3.1:8b") == ("openai", "llama3.1:8b")
    assert resolve_model("openai:qwen2.5:7b") == ("openai", "qwen2.5:7b")
    assert resolve_model("tests.unit.test_providers_select.MyProvider:x")[0] == \
        "tests.unit.test_providers_select.MyProvider"


@pytest.mark.parametrize("spec", ["\ud800", " \udfff ", "gpt\ud83d"])
def test_a_model_spec_that_is_not_unicode_is_refused_in_a_message_that_can_be_encoded(env, spec):
    # JSON can carry a lone surrogate; a message quoting it raw could then be sent nowhere (UTF-8 refuses it).
    with pytest.raises(ValueError, match="names no provider") as caught:
        resolve_model(spec, env={})
    message = str(caught.value)
    message.encode("utf-8")
    assert repr("openai:" + spec) in message and repr("anthropic:" + spec) in message


@pytest.mark.parametrize("kwargs, message", [
    ({"provider": ScriptedProvider}, "got the class ScriptedProvider: pass ScriptedProvider(...)"),
    ({"provider": 123}, "provider must be a Provider instance, a provider name, a callable or None, got 123"),
    ({"system": 5}, "system must be a string or None, got 5"),
    ({"model": 123}, "model must be a string or None, got 123"),
    ({"unattended": "no"}, "unattended must be True, False or None, got 'no'"),
])
def test_a_runtime_argument_it_cannot_use_is_refused_not_replaced_by_the_default(env, kwargs, message):
    # Before, any of these fell back to the environment's model (or was read as true) without a word.
    with pytest.raises(TypeError, match=None) as caught:
        Runtime(**kwargs)
    assert message in str(caught.value)
    runtime = Runtime(provider=ScriptedProvider(["ok"]))
    with pytest.raises(TypeError, match="got the class SimProvider"):
        runtime.provider = SimProvider
    with pytest.raises(TypeError, match="budget must be a runtime.Budget"):
        runtime.exec("go", budget=5)


@pytest.mark.parametrize("spec, side", [(":sim", "before"), ("sim:", "after"), ("openai: ", "after"), (":", "before")])
def test_a_model_spec_with_an_empty_side_of_its_colon_is_refused_saying_which(spec, side):
    with pytest.raises(ValueError, match=f"has nothing {side} its ':'"):
        resolve_model(spec, env={"OPENAI_API_KEY": "k"})
