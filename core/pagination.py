from __future__ import annotations

from rest_framework.pagination import CursorPagination


class CreatedCursorPagination(CursorPagination):
    """Cursor pages stay stable while rollouts keep adding rows, unlike offsets."""

    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"
    max_page_size = 500
