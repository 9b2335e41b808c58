"""The launch form: one set of checks for the page and the API (services re-check)."""

from __future__ import annotations

from typing import Any

from django import forms

from core.limits import (
    MAX_STEPS_DEFAULT,
    MAX_STEPS_MAX,
    MAX_STEPS_MIN,
    SAMPLES_MAX,
    SAMPLES_MIN,
    TEMPERATURE_DEFAULT,
    TEMPERATURE_MAX,
    TEMPERATURE_MIN,
)
from core.vocabulary import LAUNCHABLE_POLICIES, CheckpointKind
from evaluation.models import EvalRun
from evaluation.services import EvalError, eval_settings, parse_k, start_eval
from tasks.models import TaskSuite
from training.models import Checkpoint


class EvalRunForm(forms.Form):
    suite = forms.ModelChoiceField(queryset=TaskSuite.objects.all(), to_field_name="name")
    policy = forms.ChoiceField(choices=[(p.value, p.value) for p in LAUNCHABLE_POLICIES], required=False)
    model = forms.CharField(max_length=500, required=False)
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.filter(kind=CheckpointKind.POLICY), required=False)
    base_url = forms.CharField(max_length=300, required=False)
    k = forms.CharField(max_length=100, initial="1,5", help_text="comma-separated, e.g. 1,5")
    samples = forms.IntegerField(min_value=SAMPLES_MIN, max_value=SAMPLES_MAX, required=False)
    max_steps = forms.IntegerField(
        min_value=MAX_STEPS_MIN,
        max_value=MAX_STEPS_MAX,
        initial=MAX_STEPS_DEFAULT,
        required=False,
        help_text="agent turns per sample before it ends unfinished",
    )
    temperature = forms.FloatField(
        min_value=TEMPERATURE_MIN, max_value=TEMPERATURE_MAX, initial=TEMPERATURE_DEFAULT, required=False
    )
    force = forms.BooleanField(required=False, help_text="run despite a train/eval overlap (recorded with a warning)")

    def clean_k(self) -> str:
        # A field error, shown once beside the field, not a second copy above the form.
        text: str = self.cleaned_data["k"]
        try:
            parse_k(text)
        except EvalError as exc:
            raise forms.ValidationError(str(exc)) from None
        return text

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("temperature") is None:
            data["temperature"] = TEMPERATURE_DEFAULT
        if not data.get("policy") and not data.get("checkpoint"):
            raise forms.ValidationError("choose a policy or a checkpoint")
        if "k" in data:  # only once clean_k found it valid
            data["k_values"] = parse_k(data["k"])
            try:
                data["rollout"] = eval_settings(data, data["k_values"], data.get("checkpoint"))
            except EvalError as exc:
                raise forms.ValidationError(str(exc)) from None
        return data

    def launch(self, user: Any) -> EvalRun:
        """Start the evaluation the (valid) form describes; EvalError says why not."""
        data = self.cleaned_data
        return start_eval(
            data["suite"],
            data["rollout"],
            k_values=data["k_values"],
            checkpoint=data.get("checkpoint"),
            force=data.get("force", False),
            user=user,
        )
