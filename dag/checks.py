"""System checks run at start-up (`manage.py check`, `migrate`, `runserver`, the test runner)."""
from __future__ import annotations

import importlib

from django.core.checks import Error, register

from .conf import conf


@register()
def function_modules_import(app_configs=None, **kwargs) -> list[Error]:
    """Every module in OPENPROGRAM_FUNCTION_MODULES imports: a typo is named here, not as a 500 on `/`."""
    errors = []
    for name in conf.FUNCTION_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing module, or one whose import fails
            errors.append(Error(
                f"OPENPROGRAM_FUNCTION_MODULES lists {name!r}, which cannot be imported: "
                f"{type(exc).__name__}: {exc}",
                hint="Fix the module name (a dotted path importable from the project directory or "
                     "PYTHONPATH) or remove it from OPENPROGRAM_FUNCTION_MODULES.",
                id="dag.E001"))
    return errors
