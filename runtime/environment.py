"""The runtime's settings from the environment: OPENPROGRAM_UNATTENDED, and every setting checked at once.

Each setting is read where it is used (a provider's timeout when it is built, the default budget at a
tree's first model call), so a bad value would only show at a run. `environment_problems()` reads them
all, so a server can refuse to start on one (the web app's system check dag.E005) instead.
"""
from __future__ import annotations

from .settings_table import env_flag, read_flag, read_number


def unattended_by_default() -> bool:
    """OPENPROGRAM_UNATTENDED (default on): whether a Runtime refuses the tools a person must approve."""
    return read_flag("OPENPROGRAM_UNATTENDED")


def unattended_if_set() -> bool:
    """Whether OPENPROGRAM_UNATTENDED is set on (unset, off or not an on/off word: False). The web app's
    launches are attended unless asked, or unless this says no one attends any run here; a bad word is
    named where a run builds its runtime, as before."""
    try:
        return env_flag("OPENPROGRAM_UNATTENDED", False)
    except ValueError:
        return False


def environment_problems() -> list[str]:
    """What is wrong with the runtime's OPENPROGRAM_* environment variables, one message each (the model
    spec and its provider's key, the default budget in calls and money, the price file, the repeat
    limits, the reply caps, the model timeout and retries, OPENPROGRAM_UNATTENDED, the approval
    timeout)."""
    from .approval import approval_timeout_s
    from .default_budget import default_llm_calls, default_max_cost_usd
    from .dispatch import max_tool_calls_per_reply
    from .prices import file_prices
    from .providers.base import BUILTIN_PROVIDERS, provider_class, resolve_model
    from .providers.sdk import MAX_TOKENS_ENV
    from .repeats import MAX_FAILED_REPEATS_ENV, MAX_REPEATS_ENV, repeat_limit
    from .retry import RetryPolicy

    def model_spec() -> None:  # OPENPROGRAM_MODEL, and the key or base URL of the provider it names
        try:
            name, _ = resolve_model(None)
        except ValueError as exc:
            raise ValueError(f"OPENPROGRAM_MODEL: {exc}") from None
        # Built-in providers only: a provider of one's own is imported at its first call, not at start-up.
        problem = provider_class(name).configuration_problem() if name in BUILTIN_PROVIDERS else None
        if problem:
            raise ValueError(f"OPENPROGRAM_MODEL names the {name} provider, but there is {problem}")

    readers = [model_spec, default_llm_calls, default_max_cost_usd, file_prices,
               lambda: repeat_limit(MAX_FAILED_REPEATS_ENV), lambda: repeat_limit(MAX_REPEATS_ENV),
               max_tool_calls_per_reply, RetryPolicy.from_env, unattended_by_default,
               lambda: read_number("OPENPROGRAM_MODEL_TIMEOUT_S"), lambda: read_number(MAX_TOKENS_ENV),
               approval_timeout_s]
    problems = []
    for read in readers:
        try:
            read()
        except ValueError as exc:
            problems.append(str(exc))
    return problems
