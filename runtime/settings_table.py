"""Every setting the runtime reads from the environment, once: its name, default, topic and meaning, and
the readers the runtime's modules read it through.

The runtime never imports Django, so its settings are declared here in plain Python. The web app's own
settings are declared the same way (`dag.conf.SETTINGS`, `openprogram_web.settings_table`), with this
module's `Setting`, and docs/configuration.md is generated from all three tables
(`python manage.py configuration_docs`). Each setting is read where it is used, through `read_number`,
`read_flag`, `read_text` or `read_names`, which take its default from here; a name not in the table is a
KeyError, so a new setting cannot skip it. A bad value names the variable and what is allowed.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Setting:
    """One environment variable: `default` is the value while it is unset or blank (None: no value),
    `topic` the section of docs/configuration.md it is listed under, `meaning` what it does (Markdown, one
    paragraph, links relative to docs/), and `shown` the default as the page writes it when the value alone
    does not say it (a default computed at start-up, say). `kind` is the type of a number whose default is
    None."""

    name: str
    default: Any
    topic: str
    meaning: str
    shown: str = ""
    kind: Optional[type] = None


# The words an on/off setting may say, in pairs (the web app's settings and CLI read them too).
ON_WORDS, OFF_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_flag(name: str, default: bool) -> bool:
    """An on/off environment variable (unset or blank: `default`); a word that is neither is named, so a
    typo ("of") is not taken for either."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    word = value.strip().lower()
    if word not in (*ON_WORDS, *OFF_WORDS):
        raise ValueError(f"environment variable {name}={value!r} must be on or off "
                         f"({'/'.join(ON_WORDS)} or {'/'.join(OFF_WORDS)})")
    return word in ON_WORDS


def env_number(name: str, default, kind: type = float):
    """A number from the environment variable `name` (unset or blank: `default`); a bad value names it."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a valid {kind.__name__}") from None
    if not math.isfinite(value):  # float() reads "nan" and "inf", which pass any comparison or none
        raise ValueError(f"environment variable {name}={raw!r} must be a finite number")
    if value < 0:
        raise ValueError(f"environment variable {name}={raw!r} must not be negative")
    return value


RUNTIME_SETTINGS: dict[str, Setting] = {setting.name: setting for setting in (
    # -- models -----------------------------------------------------------------------------------
    Setting("OPENPROGRAM_MODEL", None, "models",
            "the model a run uses when none is chosen, `provider:model` (`openai:gpt-4o-mini`) or a name alone "
            "(`sim`, `sim:naive`); unset, the `openai` provider when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is "
            "set, else `anthropic` when `ANTHROPIC_API_KEY` is, else the offline simulation `sim`; see "
            "[Models and the tool loop](functions.md#models-and-the-tool-loop)",
            shown="`sim`, or the provider whose key is set"),
    Setting("OPENAI_API_KEY", None, "models", "the `openai` provider's key"),
    Setting("OPENAI_BASE_URL", None, "models",
            "another OpenAI-compatible server for the `openai` provider (Ollama, vLLM, llama.cpp: "
            "[model servers](model-servers.md)); one that takes no key needs no `OPENAI_API_KEY`",
            shown="OpenAI's API"),
    Setting("ANTHROPIC_API_KEY", None, "models", "the `anthropic` provider's key"),
    Setting("ANTHROPIC_BASE_URL", None, "models", "another Anthropic-compatible endpoint",
            shown="Anthropic's API"),
    Setting("ANTHROPIC_AUTH_TOKEN", None, "models", "a bearer token instead of `ANTHROPIC_API_KEY`"),
    Setting("OPENPROGRAM_MODEL_TIMEOUT_S", 30.0, "models",
            "seconds one attempt of a model request may take, its whole response (`0`: the default); a run's "
            "`timeout_s` cuts it shorter"),
    Setting("OPENPROGRAM_MODEL_RETRIES", 3, "models",
            "retries of a model request's transient failure (408, 409, 429, 5xx, a timeout, a dropped "
            "connection), each waiting at least what a server's `Retry-After` asks"),
    Setting("OPENPROGRAM_MODEL_RETRY_TOTAL_S", 60.0, "models",
            "seconds after a model request's first attempt when no retry starts any more; a run's "
            "`timeout_s` cuts it shorter"),
    Setting("OPENPROGRAM_MAX_TOKENS", None, "models",
            "the reply-length cap: Anthropic's `max_tokens`; for the `openai` provider sent only when set, as "
            "`max_completion_tokens` to OpenAI's own API and as `max_tokens` to a compatible server at "
            "`OPENAI_BASE_URL` (llama-cpp-python and Ollama read no other: [model servers](model-servers.md)); "
            "a reply cut off at the cap is an error naming this setting, and none of its tool calls runs",
            shown="`4096` for Anthropic (its API requires one), none sent to OpenAI", kind=int),
    # -- budgets and loops ------------------------------------------------------------------------
    Setting("OPENPROGRAM_MAX_LLM_CALLS", 500, "budgets",
            "the default budget: model calls one tree of agentic calls may make (`0`: no default); see "
            "[the guard and budgets](guard-and-budgets.md)"),
    Setting("OPENPROGRAM_MAX_COST_USD", 10.0, "budgets",
            "the default money budget: US dollars one tree of agentic calls may spend on model calls (`0`: no "
            "default); see [Money and loops](money-and-loops.md)"),
    Setting("OPENPROGRAM_PRICES", None, "budgets",
            'a JSON file of model prices, `{"<model>": {"input": USD per 1M input tokens, "output": USD per '
            '1M output tokens}}`, over the built-in table (a model is looked up as `provider:model`, then '
            'alone); read again when the file changes'),
    Setting("OPENPROGRAM_MAX_FAILED_REPEATS", 3, "budgets",
            "within one frame, an identical tool call (same name and arguments) is refused once it would be "
            "the `MAX_FAILED_REPEATS`-th whose earlier results were errors or refusals; made again after that, "
            "`runtime.LoopDetected` ends the run (`0`: off; `1` is refused, as it would refuse every call)"),
    Setting("OPENPROGRAM_MAX_REPEATS", 10, "budgets",
            "the same, for the `MAX_REPEATS`-th identical call whatever the earlier results (`0`: off)"),
    Setting("OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY", 64, "budgets",
            "tool calls of one model reply that run; each call past it is answered with an error result saying "
            "so (`0`: no cap)"),
    # -- tools and approval -----------------------------------------------------------------------
    Setting("OPENPROGRAM_UNATTENDED", True, "tools",
            "runs nobody watches: tools with `requires_approval` are not offered; for a `Runtime` made in code, "
            "and, set on explicitly, for the app's launches too (unset, those are attended unless asked: "
            "[steering](steering.md))"),
    Setting("OPENPROGRAM_UNATTENDED_DENY", [], "tools",
            "tool names (comma-separated) an unattended run does not offer either"),
    Setting("OPENPROGRAM_APPROVAL_TIMEOUT_S", 600.0, "tools",
            "in an attended run, seconds a tool call that `requires_approval` waits for a person's answer "
            "before it is denied (`refused`, refusal `denied`); above 0"),
    Setting("OPENPROGRAM_SOURCE", None, "tools",
            "the channel a run comes from; tools with that name in `unsafe_in` are not offered"),
    Setting("OPENPROGRAM_RESULTS_DIR", None, "tools", "where `persist_full` keeps untruncated tool results",
            shown="a private per-user temp directory"),
)}


def default_of(name: str) -> Any:
    """The default of the runtime setting `name`."""
    return RUNTIME_SETTINGS[name].default


def raw_text(name: str) -> str:
    """The runtime setting `name` as set, stripped ("" when unset), for a reader that checks it itself."""
    return os.environ.get(RUNTIME_SETTINGS[name].name, "").strip()


def read_text(name: str) -> Any:
    """The runtime setting `name` as text (unset or blank: its default)."""
    return raw_text(name) or RUNTIME_SETTINGS[name].default


def read_names(name: str) -> list[str]:
    """The runtime setting `name` as comma-separated names (unset or blank: its default)."""
    text = raw_text(name)
    return [item.strip() for item in text.split(",") if item.strip()] if text else list(default_of(name))


def read_flag(name: str) -> bool:
    """The on/off runtime setting `name` (unset or blank: its default); a word that is neither is named."""
    return env_flag(name, RUNTIME_SETTINGS[name].default)


def read_number(name: str):
    """The numeric runtime setting `name`, 0 or more (unset or blank: its default); a bad value is named."""
    setting = RUNTIME_SETTINGS[name]
    return env_number(name, setting.default, setting.kind or type(setting.default))
