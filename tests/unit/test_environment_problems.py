"""The start-up check of the runtime's settings (`environment_problems`, behind the web app's dag.E005)
names a bad value of every OPENPROGRAM_* setting, the money, price and repeat settings of issue 38 too."""
import pytest

from runtime.environment import environment_problems


@pytest.mark.parametrize("name, value, says", [
    ("OPENPROGRAM_MAX_COST_USD", "ten", "OPENPROGRAM_MAX_COST_USD='ten'"),
    ("OPENPROGRAM_MAX_COST_USD", "-1", "must not be negative"),
    ("OPENPROGRAM_PRICES", "/nonexistent/prices.json", "OPENPROGRAM_PRICES='/nonexistent/prices.json'"),
    ("OPENPROGRAM_MAX_FAILED_REPEATS", "three", "OPENPROGRAM_MAX_FAILED_REPEATS='three'"),
    ("OPENPROGRAM_MAX_REPEATS", "1", "OPENPROGRAM_MAX_REPEATS=1 would refuse every call"),
])
def test_a_bad_money_price_or_repeat_setting_is_named_at_start_up(monkeypatch, name, value, says):
    before = environment_problems()
    monkeypatch.setenv(name, value)
    problems = [problem for problem in environment_problems() if problem not in before]
    assert len(problems) == 1 and says in problems[0], problems


def test_a_price_file_that_is_not_json_is_named_at_start_up(monkeypatch, tmp_path):
    path = tmp_path / "prices.json"
    path.write_text("{not json")
    monkeypatch.setenv("OPENPROGRAM_PRICES", str(path))
    assert any("cannot read it as JSON" in problem for problem in environment_problems())


def test_good_money_price_and_repeat_settings_raise_no_problem(monkeypatch, tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"my-model": {"input": 1, "output": 2}}')
    before = environment_problems()
    for name, value in (("OPENPROGRAM_MAX_COST_USD", "0.5"), ("OPENPROGRAM_PRICES", str(path)),
                        ("OPENPROGRAM_MAX_FAILED_REPEATS", "0"), ("OPENPROGRAM_MAX_REPEATS", "12")):
        monkeypatch.setenv(name, value)
    assert environment_problems() == before
