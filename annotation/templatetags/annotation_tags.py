"""The annotation forms' options, from the model's choices rather than copied into templates."""

from __future__ import annotations

from django import template

from annotation.models import MAX_COMMENT, StepLabel

register = template.Library()


@register.simple_tag
def step_label_choices() -> list[tuple[str, str]]:
    return list(StepLabel.Label.choices)


@register.simple_tag
def annotation_text_max() -> int:
    return MAX_COMMENT
