"""The launch form's "Advanced" section: the model to run on, and a budget for the run.

The model is one of `dag.runs.model_choice.available_models()`; the budget is checked by
`dag.runs.launch_budget`, the same checks the API and the CLI use.
"""
from __future__ import annotations

from django import forms

from ..runs.launch_budget import COUNTS, FIELDS, HELP, MAXIMUM, MINIMUM, BudgetProblem, clean_budget
from ..runs.model_choice import ModelProblem, available_models, clean_model

LABELS = {"max_depth": "Max depth", "max_llm_calls": "Max model calls", "max_tokens": "Max tokens",
          "timeout_s": "Timeout (seconds)", "max_cost_usd": "Max cost (US dollars)"}


class LaunchOptionsForm(forms.Form):
    """After `is_valid()`, `model` is the chosen model spec (None: the server's), `budget` the launch
    budget (None: none) and `cleaned_data["unattended"]` whether no one attends the run."""

    prefix = "budget"  # the section's fields are budget-model, budget-max_depth, ...

    def __init__(self, data=None, initial_budget: dict | None = None, initial_model: str | None = None,
                 initial_unattended: bool = False):
        initial = {k: v for k, v in (initial_budget or {}).items() if k in FIELDS}
        super().__init__(data=data, initial={**initial, "model": initial_model or "",
                                             "unattended": initial_unattended})
        choices = [("", "The server's default")] + [(spec, spec) for spec, _ in available_models()]
        self.fields["model"] = forms.ChoiceField(
            choices=choices, required=False, label="Model",
            help_text="The simulated models (sim, sim:naive) run offline and are not LLMs: they pick tools by "
                      "matching words, so runs can be tried with no key.")
        for name in FIELDS:
            # The bounds the API checks and its schema publishes (`launch_budget`), so the page's inputs say them.
            common = {"required": False, "label": LABELS[name], "help_text": HELP[name],
                      "min_value": MINIMUM[name], "max_value": MAXIMUM[name]}
            self.fields[name] = forms.IntegerField(**common) if name in COUNTS else forms.FloatField(**common)
        self.fields["unattended"] = forms.BooleanField(
            required=False, label="Unattended",
            help_text="No one will answer approval requests: tools that need a person's approval are not offered "
                      "to the run's models. Left unchecked, each such call waits on this run's page for Approve or "
                      "Deny.")
        self.budget: dict | None = None
        self.model: str | None = None

    @property
    def is_set(self) -> bool:
        """Whether anything in the section is filled in (it is shown open then)."""
        values = self.data if self.is_bound else self.initial
        names = ["model", "unattended", *FIELDS]
        return any(values.get(self.add_prefix(n) if self.is_bound else n) not in (None, "", False) for n in names)

    def clean(self):
        cleaned = super().clean()
        try:
            self.budget = clean_budget({name: cleaned.get(name) for name in FIELDS if name not in self.errors})
        except BudgetProblem as exc:
            for name, messages in exc.errors.items():
                for message in messages:
                    self.add_error(name if name in self.fields else None, message)
        try:
            self.model = clean_model(cleaned.get("model"))
        except ModelProblem as exc:
            self.add_error("model", str(exc))
        return cleaned
