"""Which of a trajectory's steps its page shows: by tool, errors, flags, and text (?tool= ?errors=
?flag= ?q=, so a view is a link to share).

Filters narrow the query for the page's chunk of steps, never a list of steps in Python: a
trajectory can hold 10,000 steps and 100 MB of output. Tool, errors and flags read columns, the
first characters of an observation, or step numbers; only a text search reads whole texts, so it
reads at most SEARCH_WINDOW steps a request and says where to search on (the page loads on).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from django import forms
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast, Substr

from core.vocabulary import ActionType, Detector

if TYPE_CHECKING:
    from trajectories.models import Step

SEARCH_MAX = 200  # characters of a search
# Steps one search request reads: ~5 MB of text at the benchmark's 10 KB a step, which PostgreSQL
# reads case-insensitively in ~100 ms on a busy 2-core machine (a case-sensitive LIKE in half
# that; ILIKE and strpos(lower()) no faster). A rare word in a 10,000-step trajectory is twenty
# requests, made as the page scrolls.
SEARCH_WINDOW = 500
ANY_FLAG = "any"
# What a tool call that failed before running (trajectories.tools) and a reply that named no
# usable tool (trajectories.agent) leave as the observation: the agent is told what was wrong.
ERROR_OBSERVATION = "error: "

_Rows = TypeVar("_Rows")  # what the query gives for each step (the page's: its id)


@dataclass(frozen=True)
class FlagAtStep:
    """A scorer's flag shown at a step: the step it names, or one that changed the file it names."""

    detector: str
    evidence: str
    path: str
    line: int | None
    cheat: bool  # the detector means the agent gamed a check (core.vocabulary.CHEAT_DETECTORS)
    by_path: bool  # tied to this step by the file it changed, not named by the scorer


@dataclass(frozen=True)
class StepFilter:
    """A valid set of the page's step filters; empty values filter nothing."""

    tool: str = ""
    errors: bool = False
    flag: str = ""  # a detector, or ANY_FLAG
    text: str = ""

    @property
    def active(self) -> bool:
        return bool(self.tool or self.errors or self.flag or self.text)

    @property
    def window(self) -> int | None:
        """Steps a request may read, where the filter reads whole texts."""
        return SEARCH_WINDOW if self.text else None

    def query(self) -> str:
        """The filters as a query string, for links that keep them (empty when none)."""
        params = {"tool": self.tool, "errors": "1" if self.errors else "", "flag": self.flag, "q": self.text}
        return urlencode({k: v for k, v in params.items() if v})

    def narrow(self, steps: QuerySet[Step, _Rows], flagged: Mapping[int, list[FlagAtStep]]) -> QuerySet[Step, _Rows]:
        """`steps` cut to those the filters match; `flagged`: the flags each step earned."""
        if self.tool:
            steps = steps.filter(action_type=self.tool)
        if self.errors:
            # The first characters only: a whole observation would be read (and decompressed) for
            # every step where PostgreSQL's substring reads just the start of it.
            steps = steps.alias(observation_start=Substr("observation", 1, len(ERROR_OBSERVATION))).filter(
                (Q(exit_code__isnull=False) & ~Q(exit_code=0))
                | Q(action_type=ActionType.INVALID)
                | Q(exit_code__isnull=True, observation_start=ERROR_OBSERVATION)
            )
        if self.flag:
            wanted = [n for n, here in flagged.items() if any(self.flag in (ANY_FLAG, f.detector) for f in here)]
            steps = steps.filter(step__in=sorted(wanted))
        if self.text:
            # A substring, as typed: icontains escapes LIKE's own wildcards, so `%`, `_` or a regex
            # match themselves. The action is matched as its stored JSON text.
            steps = steps.alias(action_text=Cast("action_input", TextField())).filter(
                Q(observation__icontains=self.text)
                | Q(thought__icontains=self.text)
                | Q(action_text__icontains=self.text)
            )
        return steps


def _choices(values: Collection[str]) -> list[tuple[str, str]]:
    return [(v, v) for v in values]


class StepFilterForm(forms.Form):
    tool = forms.ChoiceField(
        required=False,
        choices=_choices([a.value for a in ActionType]),
        error_messages={"invalid_choice": "%(value)s is not an action type (" + ", ".join(ActionType) + ")."},
    )
    flag = forms.ChoiceField(
        required=False,
        choices=_choices([ANY_FLAG, *(d.value for d in Detector)]),
        error_messages={"invalid_choice": f"%(value)s is not {ANY_FLAG} or a detector's name."},
    )
    q = forms.CharField(
        required=False,
        max_length=SEARCH_MAX,
        error_messages={"max_length": f"a search is at most {SEARCH_MAX} characters (this one has %(show_value)d)."},
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Added here, not declared: a declared `errors` would hide the form's own `errors`.
        self.fields["errors"] = forms.ChoiceField(
            required=False,
            choices=[("1", "errors only")],
            error_messages={"invalid_choice": "%(value)s is not 1 (errors only) or empty (all steps)."},
        )

    def step_filter(self) -> StepFilter:
        data = self.cleaned_data
        return StepFilter(tool=data["tool"], errors=data["errors"] == "1", flag=data["flag"], text=data["q"])

    def problems(self) -> list[str]:
        """What is wrong with the query, one line a parameter, for the page."""
        return [f"{name}: {message}" for name, messages in self.errors.items() for message in messages]
