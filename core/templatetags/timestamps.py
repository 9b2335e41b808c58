"""`{{ value|when }}`: a moment as people read it ("3 minutes ago"), the exact ISO time on hover."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

# Past this, "5 months ago" says less than the date itself.
RELATIVE_FOR_DAYS = 7


def _moment(value: object) -> datetime | None:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value)  # e.g. a report's "at", stored as ISO text
        except ValueError:
            return None
    else:
        return None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, timezone.get_default_timezone())


@register.filter
def when(value: object) -> SafeString | str:
    moment = _moment(value)
    if moment is None:
        return "" if value in (None, "") else str(value)
    iso = moment.isoformat(timespec="seconds")
    age = timezone.now() - moment
    if abs(age.days) < RELATIVE_FOR_DAYS:
        shown = str(naturaltime(moment))
    else:
        shown = timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")
    return format_html('<time datetime="{}" title="{}">{}</time>', iso, iso, shown)
