"""Which model a run uses: the server's configured one, or one the launcher chose from those it offers.

On offer: `sim` and `sim:naive` (always), the server's configured model (OPENPROGRAM_MODEL), the default
model of each provider this server is set up for (OpenAI with OPENAI_API_KEY or OPENAI_BASE_URL,
Anthropic with ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN), and the models the operator lists in
OPENPROGRAM_MODELS. Nothing else: a launcher may not spend the operator's key on a model the operator did
not offer, nor name a provider class to import.
"""
from __future__ import annotations

import os
from typing import Optional

from runtime.providers.base import provider_class, resolve_model, split_model_spec

from ..conf import conf
from .launch_values import SURROGATE_PROBLEM, lone_surrogate

SIMULATED = {
    "sim": "Simulated model: offline and deterministic, not an LLM; it heeds the recursion guard's note.",
    "sim:naive": "Simulated model that ignores where it is running, so it calls itself into the depth ceiling.",
}
# The providers with an API key of their own; each is offered with its default model once it is set up.
KEYED_PROVIDERS = ("anthropic", "openai")
MAX_MODEL_CHARS = 200


class ModelProblem(ValueError):
    """The model asked for cannot be used here; the message says why and what can."""


def configured_model() -> str:
    """The model runs start on, as `provider:model` (a run may still switch per call, e.g. sim:naive); a
    provider named alone (or chosen by its API key) stands for its default model, and is written so,
    so that it is not offered twice under two names."""
    try:
        return model_spec(*resolve_model(None))
    except ValueError:  # a bad OPENPROGRAM_MODEL: the run itself will fail and say why
        return ""


def model_spec(provider: str, model: Optional[str]) -> str:
    """`provider:model`, a provider alone standing for its default model (`openai` is `openai:gpt-4o-mini`);
    the simulated models keep their short names. ValueError for a provider that cannot be loaded."""
    if model is None and provider != "sim":
        model = provider_class(provider).default_model
    return f"{provider}:{model}" if model else provider


def _configured_providers() -> set[str]:
    providers = {"sim"}
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        providers.add("openai")
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        providers.add("anthropic")
    configured = configured_model()
    if configured:
        providers.add(split_model_spec(configured)[0] or configured)
    return providers


def available_models() -> list[tuple[str, str]]:
    """(model spec, one-line description) of every model a launcher may choose, the configured one first."""
    choices: dict[str, str] = {}
    configured = configured_model()
    if configured:
        choices[configured] = "This server's default model."
    choices.update({spec: text for spec, text in SIMULATED.items() if spec not in choices})
    for provider in sorted(_configured_providers() & set(KEYED_PROVIDERS)):
        spec = model_spec(provider, None)
        choices.setdefault(spec, f"{provider.capitalize()} ({spec.partition(':')[2]}).")
    for listed in conf.MODELS:
        provider, model = split_model_spec(listed)
        if provider in _configured_providers():
            try:  # written as a launch that names it is (a provider alone: its default model)
                spec = model_spec(provider, model)
            except ValueError:  # a provider class that cannot be loaded: nothing to offer
                continue
            choices.setdefault(spec, "Offered by this server (OPENPROGRAM_MODELS).")
    return list(choices.items())


def clean_model(value) -> Optional[str]:
    """The model spec to run on (None: the server's default); ModelProblem if it cannot be used here."""
    if value is None or value == "":
        return None
    offered = [spec for spec, _ in available_models()]
    allowed = ", ".join(offered)
    if not isinstance(value, str) or len(value) > MAX_MODEL_CHARS or "\x00" in value or not value.strip():
        raise ModelProblem(f"must be a model name like 'sim' or 'openai:gpt-4o-mini' (at most "
                           f"{MAX_MODEL_CHARS} characters); this server offers {allowed}")
    # Checked before the provider's lookup, whose messages quote the name: JSON cannot carry a lone surrogate.
    bad = lone_surrogate(value)
    if bad:
        raise ModelProblem(f"model name {bad} {SURROGATE_PROBLEM}; this server offers {allowed}")
    value = value.strip()
    try:
        provider, model = resolve_model(value)
    except ValueError as exc:
        raise ModelProblem(f"{exc}; this server offers {allowed}") from None
    if provider not in _configured_providers():
        raise ModelProblem(f"provider {provider!r} is not set up on this server; it offers {allowed}")
    spec = model_spec(provider, model)
    if spec not in offered:
        raise ModelProblem(f"model {spec!r} is not offered on this server (an operator may add it to "
                           f"OPENPROGRAM_MODELS); it offers {allowed}")
    return spec
