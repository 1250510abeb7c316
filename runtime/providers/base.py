"""The one interface every model provider implements, and how a provider is chosen by name.

A model is named `provider:model` (`sim`, `sim:naive`, `openai:gpt-4o-mini`,
`anthropic:claude-sonnet-4-5`), or `dotted.path.ToProvider:model` for a provider class of your own, the
way Django picks cache and email backends: a new provider is a new file, not an edit here.
"""
from __future__ import annotations

import importlib
import os
from typing import Callable, Optional

from ..messages import ModelReply, ModelRequest

BUILTIN_PROVIDERS = {
    "sim": "runtime.providers.sim.SimProvider",
    "scripted": "runtime.providers.scripted.ScriptedProvider",
    "openai": "runtime.providers.openai_provider.OpenAIProvider",
    "anthropic": "runtime.providers.anthropic_provider.AnthropicProvider",
}


class Provider:
    """Base class. `complete()` makes one model call; `close()` releases connections.

    `check` is called while a slow call is in flight; it raises to abandon the call (a stop).
    Providers that answer instantly may ignore it.
    """

    name = "provider"
    default_model: Optional[str] = None

    def __init__(self, model: Optional[str] = None):
        self.model = model or self.default_model

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        raise NotImplementedError

    @classmethod
    def configuration_problem(cls) -> Optional[str]:
        """What the environment lacks for this provider to work (a key, say), checked at start-up;
        None when nothing is."""
        return None

    def close(self) -> None:
        """Release connections; the provider may be used again afterwards (it reconnects)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model!r}>"


def split_model_spec(spec: str) -> tuple[Optional[str], Optional[str]]:
    """`"openai:gpt-4o"` -> ("openai", "gpt-4o"); `"sim"` -> ("sim", None); `"gpt-4o"` -> (None, "gpt-4o").

    The part before the first colon names a provider when it is a built-in name or a dotted path of
    identifiers; so a model name with a version and a tag (Ollama's `llama3.1:8b`) stays a model name.
    """
    spec = spec.strip()
    head, sep, tail = spec.partition(":")
    if head in BUILTIN_PROVIDERS or "." in head and all(part.isidentifier() for part in head.split(".")):
        return head, (tail or None) if sep else None
    return None, spec or None


def provider_class(name: str) -> type:
    """The provider class for a built-in name or a dotted path; a clear error for anything else."""
    path = BUILTIN_PROVIDERS.get(name, name)
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"unknown model provider {name!r}; use one of {', '.join(BUILTIN_PROVIDERS)} "
                         f"or a dotted path to a Provider subclass")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"model provider {name!r} could not be loaded from {path!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise ValueError(f"model provider {path!r} is not a runtime.providers.Provider subclass")
    return cls


def default_provider_name(env: Optional[dict] = None) -> str:
    """With no OPENPROGRAM_MODEL: a real provider if its key is set, else the offline simulation."""
    env = os.environ if env is None else env
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "sim"


def resolve_model(spec: Optional[str], env: Optional[dict] = None) -> tuple[str, Optional[str]]:
    """(provider name, model name) for a model spec, falling back to the environment."""
    env = os.environ if env is None else env
    spec = spec if spec is not None else env.get("OPENPROGRAM_MODEL", "")
    if not spec.strip():
        return default_provider_name(env), None
    head, colon, tail = spec.strip().partition(":")
    if colon and not (head.strip() and tail.strip()):
        raise ValueError(f"model {spec!r} has nothing {'after' if head.strip() else 'before'} its ':'; write "
                         f"a provider and a model, like 'openai:gpt-4o-mini', or a name alone, like 'sim'")
    provider, model = split_model_spec(spec)
    if provider is None:
        provider = "anthropic" if model.startswith("claude") and env.get("ANTHROPIC_API_KEY") else None
        provider = provider or default_provider_name(env)
        if provider == "sim":
            # Quoted by repr() like the spec: its escapes keep the message printable (and encodable:
            # a lone surrogate, which JSON can send, cannot be written as UTF-8).
            raise ValueError(f"model {spec!r} names no provider and no API key is set; write it as "
                             f"{'openai:' + spec!r} or {'anthropic:' + spec!r}, or use 'sim' / 'sim:naive'")
    return provider, model


def create_provider(name: str, model: Optional[str] = None) -> Provider:
    return provider_class(name)(model=model)
