"""A call's arguments by parameter name, as `inspect.Signature.bind_partial` + `apply_defaults` give them.

A recorder asks for them on every recorded call, and `bind_partial` costs several microseconds (more than
the rest of a call's entry). Most decorated functions have only ordinary parameters (no `*args`,
`**kwargs` or positional-only ones), and for those the binding is a zip with the defaults filled in,
built once per function here. Any other signature, and any call the fast path cannot take as it is
(unknown or repeated names, too many arguments), goes through `inspect` itself, which gives the same
answer or raises its own `TypeError`.
"""
from __future__ import annotations

import inspect
from typing import Callable

Binder = Callable[[tuple, dict], dict]

_ORDINARY = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _by_signature(signature: inspect.Signature) -> Binder:
    def bind(args: tuple, kwargs: dict) -> dict:
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)
    return bind


def argument_binder(signature: inspect.Signature) -> Binder:
    """`bind(args, kwargs)`: {name: value} in parameter order, defaults applied; a missing argument
    without a default is left out (as `bind_partial` does); a call no binding admits raises TypeError."""
    parameters = list(signature.parameters.values())
    slow = _by_signature(signature)
    if any(parameter.kind not in _ORDINARY for parameter in parameters):
        return slow
    names = tuple(parameter.name for parameter in parameters)
    positional = sum(1 for parameter in parameters if parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    defaults = {parameter.name: parameter.default for parameter in parameters
                if parameter.default is not inspect.Parameter.empty}
    known = frozenset(names)
    # For a call of k positional arguments and no keywords: the defaults of the parameters after them.
    tails = [{name: defaults[name] for name in names[k:] if name in defaults} for k in range(positional + 1)]

    def bind(args: tuple, kwargs: dict) -> dict:
        if not kwargs and len(args) <= positional:
            bound = dict(zip(names, args))
            bound.update(tails[len(args)])
            return bound
        if len(args) > positional or any(name not in known for name in kwargs):
            return slow(args, kwargs)  # for inspect's own TypeError
        given = dict(zip(names, args))
        for name in kwargs:
            if name in given:
                return slow(args, kwargs)
        given.update(kwargs)
        return {name: given[name] if name in given else defaults[name]
                for name in names if name in given or name in defaults}
    return bind
