"""Model providers behind one small interface (`Provider.complete(request) -> ModelReply`).

Built in: `sim` (an offline simulated model, the default), `scripted` (plays a list of replies),
`openai` and `anthropic` (the official SDKs). A dotted path names a provider class of your own.
"""
from .base import (BUILTIN_PROVIDERS, Provider, create_provider, provider_class, resolve_model,
                   split_model_spec)
from .scripted import ScriptedProvider
from .sim import SimProvider

__all__ = ["Provider", "ScriptedProvider", "SimProvider", "create_provider", "provider_class",
           "resolve_model", "split_model_spec", "BUILTIN_PROVIDERS"]
