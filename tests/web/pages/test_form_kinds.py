"""The launch form sends every value the API takes, and "run again" sends back exactly what a session ran
with: tuples and lists of mixed items as JSON, lists of strings one-per-line only when that reads back,
Optional bools as none / yes / no, choices matched as they are, and numbers as JSON writes them."""
from __future__ import annotations

import html as html_lib
import re
from typing import Literal, Optional

import pytest

from dag.models import Session
from dag.pages.forms import LISTS_AS_JSON, LaunchForm
from dag.runs.launch import argument_problems
from runtime import agentic_function

pytestmark = pytest.mark.django_db


@agentic_function(register_globally=False)
def point(at: tuple[int, int] = (1, 2)) -> str:
    """Mark a point."""
    return "ok"


@agentic_function(register_globally=False)
def maybe_numbers(numbers: list[Optional[int]] = [1, None]) -> str:
    """Sum what is there."""
    return "ok"


@agentic_function(register_globally=False)
def anything(items: list = [1, {"a": 2}]) -> str:
    """Take any items."""
    return "ok"


@agentic_function(register_globally=False)
def labels(names: list[str] = ["a"], sizes: list[int] = [], flags: list[bool] = []) -> str:
    """Take plain lists."""
    return "ok"


@agentic_function(register_globally=False)
def maybe_flag(flag: Optional[bool] = None) -> str:
    """Take a flag or none."""
    return "ok"


@agentic_function(register_globally=False)
def odd_choices(mode: Literal["", "fast"] = "fast", spaced: Literal[" a", "b"] = "b") -> str:
    """Choose oddly spelled options."""
    return "ok"


@agentic_function(register_globally=False)
def counted(n: int = 1, ratio: float = 0.5) -> str:
    """Count."""
    return "ok"


@pytest.fixture
def these_functions(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = [__name__]


def resubmitted(tool, args: dict) -> LaunchForm:
    """The form of "run again" of `args`, submitted unchanged, as the page would post it."""
    shown = LaunchForm(tool, initial_args=args)
    data = {name: shown[name].value() for name in shown.fields}
    data[LISTS_AS_JSON] = shown.lists_as_json
    form = LaunchForm(tool, data={k: v for k, v in data.items() if v is not None and v is not False})
    assert form.is_valid(), form.errors
    return form


# --- lists and tuples ------------------------------------------------------------------------------

@pytest.mark.parametrize("tool, args", [
    (point, {"at": [3, 4]}),
    (maybe_numbers, {"numbers": [1, None, 3]}),
    (anything, {"items": [1, {"a": 2}, True, "x"]}),
    (labels, {"names": ["two\nlines", "  padded  ", ""], "sizes": [1, 2], "flags": [True]}),
    (labels, {"names": ["a\u2028b"], "sizes": [], "flags": []}),  # a line break splitlines() also splits at
    (labels, {"names": ["plain", "words"], "sizes": [0, 1], "flags": [False, True]}),
])
def test_run_again_sends_back_exactly_the_arguments_the_api_took(tool, args):
    assert argument_problems(tool, args) == {}
    assert resubmitted(tool, args).args == args


def test_a_tuples_prefilled_default_is_valid_as_it_is():
    form = LaunchForm(point)
    assert form["at"].value() == "[\n  1,\n  2\n]"  # JSON, not one item per line
    assert LaunchForm(point, data={"at": form["at"].value()}).is_valid()


def test_lists_of_plain_items_stay_one_item_per_line():
    form = LaunchForm(labels, initial_args={"names": ["alpha", "beta"], "sizes": [1, 2]})
    assert form.lists_as_json == []
    assert form["names"].value() == "alpha\nbeta" and form["sizes"].value() == "1\n2"
    assert "One item per line." in form.fields["names"].help_text


def test_a_list_of_strings_that_lines_would_change_is_shown_as_json_and_says_why(logged_in, these_functions, user):
    session = Session.objects.create(owner=user, function="labels", args={"names": ["two\nlines"]})
    page = logged_in.get(f"/functions/labels/?from={session.pk}").content.decode()
    field = re.search(r'<div class="field field-names.*?</div>', page, re.S).group(0)
    assert "[\n  &quot;two\\nlines&quot;\n]</textarea>" in field
    assert f'<input type="hidden" name="{LISTS_AS_JSON}" value="names">' in field
    assert "one item per line would change some of these items" in html_lib.unescape(field)
    # The other lists read back from lines, so they stay one item per line, with no marker.
    assert page.count(f'name="{LISTS_AS_JSON}"') == 1


def test_a_list_posted_as_json_launches_with_the_json(logged_in, these_functions):
    response = logged_in.post("/functions/labels/", {"names": '["two\\nlines", " x "]', LISTS_AS_JSON: "names"})
    assert response.status_code == 302
    assert Session.objects.get().args["names"] == ["two\nlines", " x "]


def test_a_list_posted_as_json_with_an_error_is_shown_again_as_json(logged_in, these_functions):
    response = logged_in.post("/functions/labels/", {"names": "[oops", LISTS_AS_JSON: "names"})
    assert response.status_code == 400
    assert "not valid JSON" in response.context["form"].errors["names"][0]
    assert f'name="{LISTS_AS_JSON}" value="names"' in response.content.decode()


# --- Optional bools ------------------------------------------------------------------------------

def test_an_optional_bool_is_a_select_of_none_yes_and_no():
    field = str(LaunchForm(maybe_flag)["flag"])
    assert "<select" in field and 'type="checkbox"' not in field
    assert '<option value="" selected>(none)</option>' in field
    assert '<option value="true">Yes</option>' in field and '<option value="false">No</option>' in field


@pytest.mark.parametrize("posted, sent", [("", None), ("true", True), ("false", False)])
def test_an_optional_bool_sends_none_true_or_false(posted, sent):
    form = LaunchForm(maybe_flag, data={"flag": posted})
    assert form.is_valid(), form.errors
    assert form.args == {"flag": sent}


@pytest.mark.parametrize("value", [None, True, False])
def test_run_again_keeps_an_optional_bools_value(value):
    assert resubmitted(maybe_flag, {"flag": value}).args == {"flag": value}


@pytest.mark.parametrize("stored", [[True], {"a": 1}, "yes"])
def test_run_again_of_an_optional_bool_stored_as_another_type_shows_none(stored):
    # An edited or imported session's value: shown as none, not a TypeError (a 500 on "Run again").
    assert '<option value="" selected>(none)</option>' in str(LaunchForm(maybe_flag, initial_args={"flag": stored})["flag"])


# --- choices -----------------------------------------------------------------------------------

@pytest.mark.parametrize("posted, sent", [
    ({"mode": "", "spaced": "b"}, {"mode": "", "spaced": "b"}),
    ({"mode": "fast", "spaced": " a"}, {"mode": "fast", "spaced": " a"}),
])
def test_choices_are_matched_exactly_as_the_page_sends_them(posted, sent):
    form = LaunchForm(odd_choices, data=posted)
    assert form.is_valid(), form.errors
    assert form.args == sent


def test_a_choice_near_an_option_is_not_taken_for_it():
    form = LaunchForm(odd_choices, data={"mode": "fast", "spaced": "a"})
    assert form.errors["spaced"] == ["must be one of ' a', 'b'; got 'a'"]


def test_the_empty_text_option_is_labelled():
    assert '<option value="">(empty text)</option>' in str(LaunchForm(odd_choices)["mode"])


# --- numbers as JSON writes them -------------------------------------------------------------------

@pytest.mark.parametrize("text", ["1_000", "\u0661\u0662", "\uff11", "0x10", " "])
def test_an_integer_field_takes_only_ascii_digits(text):
    form = LaunchForm(counted, data={"n": text, "ratio": "0.5"})
    assert not form.is_valid() and list(form.errors) == ["n"]


@pytest.mark.parametrize("text", ["1_000.5", "\u0661.5", "infinity"])
def test_a_number_field_takes_only_json_numbers(text):
    assert list(LaunchForm(counted, data={"n": "1", "ratio": text}).errors) == ["ratio"]


def test_an_integer_too_long_to_convert_gets_a_short_message_naming_the_limit():
    form = LaunchForm(counted, data={"n": "9" * 5_000, "ratio": "0.5"})
    assert form.errors["n"] == ["expected an integer of at most 4,300 digits, got one of 5,000 digits"]


def test_a_long_text_is_quoted_short_in_the_error():
    message = LaunchForm(counted, data={"n": "x" * 5_000, "ratio": "0.5"}).errors["n"][0]
    assert message.startswith("expected an integer, got 'xxx") and len(message) < 80


@pytest.mark.parametrize("text, sent", [("-12", -12), ("+7", 7), ("007", 7)])
def test_integers_with_a_sign_or_leading_zeros_are_read(text, sent):
    form = LaunchForm(counted, data={"n": text, "ratio": "1.5e2"})
    assert form.is_valid(), form.errors
    assert form.args == {"n": sent, "ratio": 150.0}
