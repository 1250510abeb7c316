"""Hostile or unlucky input to the API and the launch form gets a 4xx that names the problem, never a 500."""
import pytest

from dag.models import Session
from dag.pages.forms import LaunchForm
from tests.web.launch_helpers import widgets
from tests.web.pages.test_forms import form_data  # a valid submission of the `widgets` form

pytestmark = pytest.mark.django_db


def post_json(client, path, body: str):
    return client.post(path, body, content_type="application/json")


# --- JSON nested too deep --------------------------------------------------------------------------

def arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("nested", [arrays(1000), arrays(100_000), objects(1000), objects(900), objects(150)])
def test_deeply_nested_json_in_a_launch_is_a_400_naming_the_depth(logged_in, test_functions, nested):
    body = '{"function": "widgets", "args": {"question": "q", "extra": %s}}' % nested
    response = post_json(logged_in, "/api/sessions/", body)
    assert response.status_code == 400
    assert "nested deeper than 100 levels" in response.json()["detail"]
    assert not Session.objects.exists()


@pytest.mark.parametrize("nested", [arrays(1000), objects(900)])
def test_deeply_nested_json_to_the_anonymous_token_endpoint_is_a_400(client, nested):
    response = post_json(client, "/api/token/", '{"username": %s, "password": "x"}' % nested)
    assert response.status_code == 400
    assert "nested deeper than 100 levels" in response.json()["detail"]


def test_json_nested_within_the_limit_still_launches(logged_in, test_functions):
    body = '{"function": "widgets", "args": {"question": "q", "extra": %s}}' % objects(90)
    assert post_json(logged_in, "/api/sessions/", body).status_code == 201


# --- lone surrogates (valid JSON escapes, invalid Unicode) -------------------------------------------

SURROGATE = "is not valid Unicode: it holds a lone surrogate"


def test_a_lone_surrogate_as_a_parameter_name_is_a_400_naming_it(logged_in, test_functions):
    body = r'{"function": "widgets", "args": {"question": "q", "\ud800": 1}}'
    response = post_json(logged_in, "/api/sessions/", body)
    assert response.status_code == 400
    [message] = response.json()["args"]
    assert message.startswith(r"parameter name '\ud800' " + SURROGATE)
    assert not Session.objects.exists()


@pytest.mark.parametrize("args, name, quoted", [
    (r'{"question": "q", "extra": {"k\udc00": 1}}', "extra", r"'k\udc00'"),   # a key inside a value
    (r'{"question": "\ud83d"}', "question", r"'\ud83d'"),                      # half of an emoji
    (r'{"question": "q", "tags": ["ok", "\udfff"]}', "tags", r"'\udfff'"),
])
def test_a_lone_surrogate_in_a_value_is_a_400_naming_the_parameter_and_text(logged_in, test_functions,
                                                                           args, name, quoted):
    response = post_json(logged_in, "/api/sessions/", '{"function": "widgets", "args": %s}' % args)
    assert response.status_code == 400
    assert response.json()["args"] == {name: [f"{quoted} {SURROGATE} (half of a UTF-16 pair); send whole "
                                              f"characters"]}


def test_a_surrogate_pair_is_a_whole_character_and_launches(logged_in, test_functions):
    response = post_json(logged_in, "/api/sessions/", r'{"function": "echo", "args": {"text": "\ud83d\ude00"}}')
    assert response.status_code == 201 and response.json()["args"] == {"text": "\U0001F600"}


# --- numbers JSON cannot hold, through the launch form ------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("ratio", "inf", "expected a finite number, got 'inf'"),
    ("ratio", "-Infinity", "expected a finite number, got '-Infinity'"),
    ("ratio", "nan", "expected a finite number, got 'nan'"),
    ("ratio", "1e999", "expected a finite number, got '1e999'"),
    ("extra", '{"a": NaN}', "expected finite numbers, got NaN"),
    ("extra", '{"a": [-Infinity]}', "expected finite numbers, got -Infinity"),
    ("extra", '{"a": 1e999}', "expected a finite number, got '1e999'"),
])
def test_a_number_json_cannot_hold_is_an_error_on_its_field(logged_in, test_functions, field, value, message):
    form = LaunchForm(widgets, data=form_data(**{field: value}))
    assert not form.is_valid() and list(form.errors) == [field]
    assert message in form.errors[field][0]

    response = logged_in.post("/functions/widgets/", form_data(**{field: value}))
    assert response.status_code == 400 and not Session.objects.exists()


def test_finite_numbers_still_launch_from_the_form(logged_in, test_functions):
    response = logged_in.post("/functions/widgets/", form_data(ratio="2.5e-3", extra='{"a": -1.5e3}'))
    assert response.status_code == 302
    assert Session.objects.get().args["ratio"] == 0.0025


# --- JSON nested too deep, through the launch form -------------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("extra", arrays(101)), ("extra", objects(150)), ("extra", arrays(20_000)), ("extra", objects(5000)),
])
def test_json_nested_too_deep_in_the_form_is_an_error_on_its_field_naming_the_limit(logged_in, test_functions,
                                                                                   field, value):
    form = LaunchForm(widgets, data=form_data(**{field: value}))
    assert not form.is_valid() and list(form.errors) == [field]
    assert "nested deeper than 100 levels" in form.errors[field][0]

    response = logged_in.post("/functions/widgets/", form_data(**{field: value}))
    assert response.status_code == 400 and not Session.objects.exists()
    assert "nested deeper than 100 levels" in response.content.decode()


def test_json_nested_within_the_limit_launches_from_the_form(logged_in, test_functions):
    assert logged_in.post("/functions/widgets/", form_data(extra=objects(90))).status_code == 302
