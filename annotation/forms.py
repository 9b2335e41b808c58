"""Forms of the comparison pages: a reviewer's judgement, a researcher's new comparison set."""

from __future__ import annotations

from django import forms

from annotation.models import MAX_COMMENT, Judgement
from annotation.pairs import MAX_PAIRS, MAX_REVIEWERS, PairRequest
from core.vocabulary import ComparisonChoice, ComparisonStrategy, choices

# What the reviewer sees: A is the left patch, B the right one (annotation.queue.judge translates).
SCREEN_CHOICES = [
    (ComparisonChoice.A.value, "Left is better"),
    (ComparisonChoice.B.value, "Right is better"),
    (ComparisonChoice.TIE.value, "Tie"),
    (ComparisonChoice.BOTH_BAD.value, "Both bad"),
]


class JudgementForm(forms.Form):
    choice = forms.ChoiceField(choices=SCREEN_CHOICES, widget=forms.RadioSelect)
    reason = forms.CharField(
        max_length=MAX_COMMENT,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Why? (required; Enter submits, Shift+Enter newline)"}),
    )
    tags = forms.MultipleChoiceField(
        choices=[(t, t) for t in Judgement.TAGS], required=False, widget=forms.CheckboxSelectMultiple
    )


class ComparisonSetForm(forms.Form):
    name = forms.SlugField(max_length=100)
    suite = forms.ChoiceField(choices=[])
    strategy = forms.ChoiceField(choices=choices(ComparisonStrategy))
    max_pairs = forms.IntegerField(min_value=1, max_value=MAX_PAIRS, initial=50, label="Pairs at most")
    reviewers = forms.IntegerField(min_value=1, max_value=MAX_REVIEWERS, initial=1, label="Reviewers per pair (k)")
    per_task = forms.IntegerField(min_value=1, initial=5, label="Pairs per task at most")
    batches = forms.CharField(required=False, max_length=500, help_text="rollout batch ids, comma separated")
    training_set = forms.SlugField(required=False, max_length=100)
    side_a = forms.CharField(required=False, max_length=300, help_text="checkpoints: batch:ID or model:NAME")
    side_b = forms.CharField(required=False, max_length=300, help_text="checkpoints: batch:ID or model:NAME")
    seed = forms.IntegerField(required=False, initial=0)
    lock_minutes = forms.IntegerField(min_value=1, max_value=24 * 60, initial=10, label="Lock (minutes)")

    def __init__(self, *args: object, suites: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["suite"].choices = [(s, s) for s in suites]  # type: ignore[attr-defined]

    def clean_batches(self) -> tuple[int, ...]:
        text: str = self.cleaned_data["batches"]
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not all(p.isdigit() for p in parts):
            raise forms.ValidationError("batch ids are numbers, comma separated")
        return tuple(int(p) for p in parts)

    def request(self) -> PairRequest:
        data = self.cleaned_data
        return PairRequest(
            name=data["name"],
            suite=data["suite"],
            strategy=data["strategy"],
            max_pairs=data["max_pairs"],
            reviewers=data["reviewers"],
            per_task=data["per_task"],
            batches=data["batches"],
            training_set=data["training_set"] or "",
            side_a=data["side_a"].strip(),
            side_b=data["side_b"].strip(),
            seed=data["seed"] or 0,
            lock_seconds=data["lock_minutes"] * 60,
        )


class BulkForm(forms.Form):
    """One bulk action on a set's pairs (annotation.bulk)."""

    ACTIONS = [("priority", "Serve first"), ("reserve", "Reserve for a reviewer"), ("release", "Release reservations")]
    action = forms.ChoiceField(choices=ACTIONS)
    task = forms.CharField(max_length=200, required=False, help_text="only the pairs of this task id (empty: all)")
    priority = forms.IntegerField(required=False, min_value=-100, max_value=100, initial=10)
    reviewer = forms.CharField(max_length=150, required=False, help_text="username")
    count = forms.IntegerField(required=False, min_value=1, max_value=10_000, initial=20)

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        action = data.get("action")
        if action == "priority" and data.get("priority") is None:
            self.add_error("priority", "give a priority from -100 to 100")
        if action == "reserve":
            if not data.get("reviewer"):
                self.add_error("reviewer", "give the reviewer's username")
            if data.get("count") is None:
                self.add_error("count", "give how many pairs to reserve")
        return data
