"""What every API list filters on besides its own fields: when a row was made."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601 with any offset, handed to the database in UTC.

    PostgreSQL refuses offsets beyond ±15:59 that ISO 8601 and Python accept; sent as they
    came, `2020-01-01T00:00+20:00` would be a database error instead of a date.
    """

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError("date out of range", code="invalid") from None


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class CreatedRangeFilterSet(django_filters.FilterSet):
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte", label="made at or after (ISO 8601)")
    created_before = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt", label="made before (ISO 8601)")
