"""What a newcomer meets on the pages: catalog cards that say what each function takes and run it, error
pages inside the site's layout, and a text area's line breaks as the function expects them."""
from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.views.defaults import server_error

from dag.models import Session

from ..launch_helpers import wait_for_end

pytestmark = pytest.mark.django_db


def test_catalog_cards_list_parameters_and_a_run_button(logged_in, test_functions):
    html = logged_in.get("/").content.decode()
    card = html[html.index('data-function="widgets"'):]
    card = card[:card.index('class="catalog-entry"', 1)] if 'class="catalog-entry"' in card else card
    assert '<a class="btn" data-role="run" href="/functions/widgets/"' in card
    assert '<li data-param="question"><code>question</code> <span class="param-kind">text, required</span>' in card
    assert '<span class="param-kind">integer = 3</span>' in card  # count's default
    assert '<span class="param-kind">choice = &quot;brief&quot;</span>' in card
    assert 'data-param="secret"' not in card  # hidden from forms, hidden from the card


def test_a_missing_page_is_the_sites_own_not_a_bare_not_found(logged_in):
    answer = logged_in.get("/no-such-page/")
    html = answer.content.decode()
    assert answer.status_code == 404
    assert 'class="topbar"' in html and 'href="/sessions/"' in html and "Not found" in html
    assert "<code>/no-such-page/</code>" in html


def test_a_server_error_page_is_in_the_sites_layout():
    answer = server_error(RequestFactory().get("/anything/"))
    html = answer.content.decode()
    assert answer.status_code == 500 and 'class="topbar"' in html and 'href="/"' in html


@pytest.mark.django_db(transaction=True)
def test_a_text_areas_crlf_line_breaks_reach_the_function_as_newlines(logged_in, test_functions):
    answer = logged_in.post("/functions/widgets/", {"question": "line one\r\nline two", "mode": "brief", "count": "3",
                                                    "ratio": "0.5", "tags": "alpha\r\nbeta", "title": "untitled",
                                                    "level": "2", "extra": "{}"})
    assert answer.status_code == 302, answer.content.decode()[:2000]
    session = wait_for_end(Session.objects.get())
    assert session.status == "completed" and session.args["question"] == "line one\nline two" and session.result["question"] == "line one\nline two"


def test_the_api_docs_page_has_a_way_back_into_the_app(logged_in):
    html = logged_in.get("/api/docs/").content.decode()
    assert 'id="swagger-ui"' in html  # still Swagger UI's page
    assert '<a href="/" data-role="back-to-app">← Functions</a>' in html and 'href="/sessions/"' in html
