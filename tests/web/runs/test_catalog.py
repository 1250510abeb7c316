"""The function catalog: what OPENPROGRAM_FUNCTION_MODULES lists, on the page and in lookups."""
from __future__ import annotations

import pytest

from dag.runs import catalog
from runtime import registry


EXTRA = "tests.web.catalog_extra"


def test_default_catalog_is_the_five_examples():
    assert [entry.name for entry in catalog.entries()] == ["careful_agent", "research_agent", "runaway_agent",
                                                           "slow_count", "wiki_agent"]


def test_entries_carry_label_description_and_spec():
    entry = catalog.get("slow_count")
    assert entry.label == "Slow count"
    assert entry.description.startswith("Count to n through n child calls")
    assert list(entry.spec["parameters"]["properties"]) == ["n", "delay_s"]
    assert entry.as_dict() == {"name": "slow_count", "label": "Slow count", "description": entry.description,
                               "spec": entry.spec}


def test_functions_from_several_modules_and_leaf_tools_left_out(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["examples.functions", EXTRA]
    names = [entry.name for entry in catalog.entries()]
    assert "markup_doc" in names and "wiki_agent" in names
    assert "leaf_helper" not in names and "search_notes" not in names


def test_catalog_functions_are_registered_as_tools_for_models():
    with registry.isolated({}):
        catalog.entries()
        assert {"wiki_agent", "search_notes", "count_step"} <= set(registry.names())


def test_unknown_function_names_the_ones_that_exist():
    with pytest.raises(catalog.UnknownFunction) as caught:
        catalog.get("nope")
    assert "unknown function 'nope'" in str(caught.value) and "wiki_agent" in str(caught.value)


def test_a_module_that_cannot_be_imported_is_named(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["no_such_module_here"]
    with pytest.raises(ImportError, match="OPENPROGRAM_FUNCTION_MODULES lists 'no_such_module_here'"):
        catalog.entries()


@pytest.mark.django_db
def test_catalog_page_lists_each_function_with_a_link_to_its_form(logged_in):
    html = logged_in.get("/").content.decode()
    for name in ("wiki_agent", "research_agent", "runaway_agent", "slow_count"):
        assert f'href="/functions/{name}/"' in html
    assert "Slow count" in html and "Count to n through n child calls" in html


@pytest.mark.django_db
def test_catalog_page_shows_docstrings_and_labels_as_text(logged_in, settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = [EXTRA]
    html = logged_in.get("/").content.decode()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html


@pytest.mark.django_db
def test_empty_catalog_says_where_functions_come_from(logged_in, settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = []
    assert b"OPENPROGRAM_FUNCTION_MODULES" in logged_in.get("/").content
