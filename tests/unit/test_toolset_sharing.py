"""Toolset names are global: two modules' tools in one toolset are said, not silently merged."""
import logging

from runtime import function, registry


def tool_of(module: str, name: str, toolset: str):
    """A tool named `name` in `toolset`, defined as if in `module` (its origin is what the warning names)."""
    namespace = {"__name__": module, "function": function}
    exec(f"@function(toolset=({toolset!r},))\ndef {name}(topic: str) -> str:\n    return topic\n", namespace)
    return namespace[name]


def test_a_toolset_holding_two_modules_tools_is_warned_naming_both(caplog):
    with registry.isolated({}), caplog.at_level(logging.WARNING, logger="runtime"):
        tool_of("shop.search", "search_products", "lookup")
        tool_of("shop.search", "read_product", "lookup")
        registry.toolset("lookup")
        assert not caplog.records  # one module's own tools share a toolset freely
        tool_of("myproject.agents", "find_notes", "lookup")
        assert len(registry.toolset("lookup")) == 3  # still merged: the warning explains, changes nothing
        registry.toolset("lookup")
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1, warnings  # once per toolset and set of modules
    assert warnings[0].startswith("toolset 'lookup' holds tools of 2 modules (myproject.agents: find_notes; "
                                  "shop.search: search_products, read_product)")


def test_distinct_toolsets_of_two_modules_are_not_warned(caplog):
    with registry.isolated({}), caplog.at_level(logging.WARNING, logger="runtime"):
        tool_of("shop.search", "search_products", "products")
        tool_of("myproject.agents", "find_notes", "library")
        registry.toolset("products"), registry.toolset("library")
    assert not caplog.records
