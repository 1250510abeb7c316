from django.core.checks import run_checks

from dag.checks import function_modules_import


def test_listed_function_modules_that_import_pass(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["examples.functions"]
    assert function_modules_import() == []


def test_a_mistyped_function_module_is_named_at_start_up(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["examples.functions", "examples.functoins"]
    errors = [e for e in run_checks() if e.id == "dag.E001"]
    assert len(errors) == 1
    assert "'examples.functoins', which cannot be imported" in errors[0].msg
    assert "ModuleNotFoundError" in errors[0].msg
