"""What a model call cost, in US dollars: the provider's own figure, else its tokens times the model's price.

A price is USD per million input tokens and per million output tokens. Where a price comes from, the
first found wins:

1. `set_price(model, input_per_mtok, output_per_mtok)`, made by code in this process;
2. the JSON file named by OPENPROGRAM_PRICES, `{"<model>": {"input": 2.5, "output": 10}}` (re-read when
   the file changes);
3. `BUILTIN_PRICES`, the published list prices of the models the built-in providers offer.

Each source is asked for `provider:model` (`openai:gpt-4o-mini`), then for the model alone. A model
without a price costs nothing known: `call_cost` answers None, never 0, so a run's cost can say how many
of its calls it does not know.

A provider that knows a call's cost (some gateways return it) puts it in the reply's
`usage["cost_usd"]`; that figure is used as it is.
"""
from __future__ import annotations

import json
import logging
import math
import os
import threading
from typing import Any, NamedTuple, Optional

from .settings_table import raw_text

logger = logging.getLogger("runtime")

PRICES_ENV = "OPENPROGRAM_PRICES"
COST_KEY = "cost_usd"  # where a reply's usage carries the call's cost
PER = 1_000_000


class Price(NamedTuple):
    """USD per million tokens."""

    input: float
    output: float


# List prices in USD per million tokens, standard tier (no batch or cache discounts), as published on
# openai.com/api/pricing and anthropic.com/pricing. Read in November 2025: prices change, so check
# them there before relying on a figure, and override any with OPENPROGRAM_PRICES or set_price.
PRICES_READ_ON = "2025-11"
BUILTIN_PRICES: dict[str, Price] = {
    "openai:gpt-5": Price(1.25, 10.00),
    "openai:gpt-5-mini": Price(0.25, 2.00),
    "openai:gpt-5-nano": Price(0.05, 0.40),
    "openai:gpt-4.1": Price(2.00, 8.00),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:gpt-4.1-nano": Price(0.10, 0.40),
    "openai:gpt-4o": Price(2.50, 10.00),
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:o3": Price(2.00, 8.00),
    "openai:o3-mini": Price(1.10, 4.40),
    "openai:o4-mini": Price(1.10, 4.40),
    "anthropic:claude-opus-4-5": Price(5.00, 25.00),
    "anthropic:claude-opus-4-1": Price(15.00, 75.00),
    "anthropic:claude-opus-4-0": Price(15.00, 75.00),
    "anthropic:claude-sonnet-4-5": Price(3.00, 15.00),
    "anthropic:claude-sonnet-4-0": Price(3.00, 15.00),
    "anthropic:claude-3-7-sonnet-latest": Price(3.00, 15.00),
    "anthropic:claude-haiku-4-5": Price(1.00, 5.00),
    "anthropic:claude-3-5-haiku-latest": Price(0.80, 4.00),
    # The offline simulation costs nothing, and says so, rather than "unknown".
    "sim:heeding": Price(0.0, 0.0),
    "sim:naive": Price(0.0, 0.0),
}

_set_in_code: dict[str, Price] = {}
_lock = threading.Lock()
# The OPENPROGRAM_PRICES file as last read: (path, modification time, size, its prices).
_file_cache: Optional[tuple[str, float, int, dict[str, Price]]] = None


def _money(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a number of US dollars per million tokens >= 0, got {value!r}")
    return float(value)


def set_price(model: str, input_per_mtok: float, output_per_mtok: float) -> None:
    """Price `model` ("openai:gpt-4o-mini", or a name alone for every provider) in USD per million input
    and output tokens, for this process; it wins over OPENPROGRAM_PRICES and the built-in table."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"set_price: model must be a model name like 'openai:gpt-4o-mini', got {model!r}")
    price = Price(_money("set_price: input_per_mtok", input_per_mtok),
                  _money("set_price: output_per_mtok", output_per_mtok))
    with _lock:
        _set_in_code[model.strip()] = price


def _read_price_file(path: str) -> dict[str, Price]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{PRICES_ENV}={path!r}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{PRICES_ENV}={path!r}: expected an object {{\"<model>\": {{\"input\": USD per 1M "
                         f"input tokens, \"output\": USD per 1M output tokens}}}}")
    prices = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != {"input", "output"}:
            raise ValueError(f"{PRICES_ENV}={path!r}: model {model!r} needs exactly \"input\" and \"output\" "
                             f"(USD per million tokens), got {entry!r:.100}")
        prices[model] = Price(_money(f"{PRICES_ENV}: {model}.input", entry["input"]),
                              _money(f"{PRICES_ENV}: {model}.output", entry["output"]))
    return prices


def file_prices() -> dict[str, Price]:
    """The OPENPROGRAM_PRICES file's prices ({} when unset), read again only when the file changed."""
    global _file_cache
    path = raw_text(PRICES_ENV)
    if not path:
        return {}
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise ValueError(f"{PRICES_ENV}={path!r}: no such readable file ({exc.strerror})") from None
    cached = _file_cache
    if cached is not None and cached[:3] == (path, stat.st_mtime, stat.st_size):
        return cached[3]
    prices = _read_price_file(path)
    _file_cache = (path, stat.st_mtime, stat.st_size, prices)
    return prices


def price_of(provider: Optional[str], model: Optional[str]) -> Optional[Price]:
    """The price of `model` as served by `provider`, or None when no source prices it."""
    if not model:
        return None
    names = [f"{provider}:{model}", model] if provider else [model]
    for source in (_set_in_code, file_prices(), BUILTIN_PRICES):
        for name in names:
            price = source.get(name)
            if price is not None:
                return price
    return None


def call_cost(usage: dict, price: Optional[Price]) -> Optional[float]:
    """One call's cost in USD from its (clean) usage: the provider's own `cost_usd` if it gave one, else
    the tokens at `price` (`price_of`, looked up before the call); None when neither is known."""
    given = usage.get(COST_KEY)
    if isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given) and given >= 0:
        return float(given)
    if price is None:
        return None
    return (usage["input_tokens"] * price.input + usage["output_tokens"] * price.output) / PER


def log_unpriced(model: Optional[str], cap: str) -> None:
    """Say, once per tree, that `cap` (a money limit, as its setting reads) cannot count calls to an
    unpriced `model`: a limit that silently let them through would be no limit."""
    logger.warning("the cost of a call to model %r is unknown (it has no price: set one with runtime.set_price "
                   "or %s), so %s cannot count it or any later call of unknown cost in this tree",
                   model, PRICES_ENV, cap)
