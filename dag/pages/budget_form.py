"""The launch form's "Advanced" section: a budget for the run, checked by `dag.runs.launch_budget`."""
from __future__ import annotations

from django import forms

from ..runs.launch_budget import COUNTS, FIELDS, HELP, MAX_COUNT, BudgetProblem, clean_budget

LABELS = {"max_depth": "Max depth", "max_llm_calls": "Max model calls", "max_tokens": "Max tokens",
          "timeout_s": "Timeout (seconds)"}


class LaunchBudgetForm(forms.Form):
    """Optional limits for the whole run. After `is_valid()`, `budget` is the launch budget (or None)."""

    prefix = "budget"

    def __init__(self, data=None, initial_budget: dict | None = None):
        super().__init__(data=data, initial={k: v for k, v in (initial_budget or {}).items() if k in FIELDS})
        for name in FIELDS:
            common = {"required": False, "label": LABELS[name], "help_text": HELP[name], "min_value": 1}
            self.fields[name] = (forms.IntegerField(max_value=MAX_COUNT, **common) if name in COUNTS
                                 else forms.FloatField(**{**common, "min_value": 0.001}))
        self.budget: dict | None = None

    @property
    def has_limits(self) -> bool:
        """Whether any limit is filled in (the section is shown open then)."""
        values = self.data if self.is_bound else self.initial
        return any(values.get(self.add_prefix(n) if self.is_bound else n) not in (None, "") for n in FIELDS)

    def clean(self):
        cleaned = super().clean()
        try:
            self.budget = clean_budget({name: cleaned.get(name) for name in FIELDS if name not in self.errors})
        except BudgetProblem as exc:
            for name, messages in exc.errors.items():
                for message in messages:
                    self.add_error(name if name in self.fields else None, message)
        return cleaned
