"""`runtime.binding.argument_binder` answers what `inspect`'s `bind_partial` + `apply_defaults` answer."""
import inspect
import itertools

import pytest

from runtime.binding import argument_binder


def f_plain(a, b, c=3): ...
def f_all_defaults(a=1, b="two"): ...
def f_keyword_only(a, *, b, c=None): ...
def f_varargs(a, *rest, b=2, **more): ...
def f_positional_only(a, /, b=2): ...
def f_none(): ...


SIGNATURES = [f_plain, f_all_defaults, f_keyword_only, f_varargs, f_positional_only, f_none]
ARGS = [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)]
KWARGS = [{}, {"a": 10}, {"b": 20}, {"c": 30}, {"b": 20, "c": 30}, {"z": 0}, {"a": 10, "b": 20}]


def reference(signature, args, kwargs):
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError:
        return TypeError
    bound.apply_defaults()
    return list(bound.arguments.items())


@pytest.mark.parametrize("function", SIGNATURES, ids=lambda fn: fn.__name__)
def test_every_call_binds_as_inspect_does_order_included(function):
    signature = inspect.signature(function)
    bind = argument_binder(signature)
    refused = 0
    for args, kwargs in itertools.product(ARGS, KWARGS):
        expected = reference(signature, args, kwargs)
        if expected is TypeError:
            refused += 1
            with pytest.raises(TypeError):
                bind(args, dict(kwargs))
        else:
            assert list(bind(args, dict(kwargs)).items()) == expected, (function.__name__, args, kwargs)
    assert refused  # the table reaches the refusals too, not only the calls that bind


def test_a_binding_is_a_fresh_dict_each_call():
    bind = argument_binder(inspect.signature(f_plain))
    first = bind((1, 2, 3), {})
    first["a"] = "changed"
    assert bind((1, 2, 3), {}) == {"a": 1, "b": 2, "c": 3}
