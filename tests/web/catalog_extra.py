"""A second function module for the catalog tests (a docstring with markup, a leaf tool)."""
from runtime import agentic_function, function


@agentic_function(label="Markup <b>bold</b>")
def markup_doc(text: str) -> str:
    """Shows <script>alert('x')</script> as text."""
    return text


@function
def leaf_helper(x: int) -> int:
    """A leaf tool: registered, but not in the catalog."""
    return x
