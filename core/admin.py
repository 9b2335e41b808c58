from __future__ import annotations

from django.contrib import admin

from core.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    # Admins see who holds which key and can revoke it; the hash is never shown or edited.
    list_display = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "name", "prefix")
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("user", "name", "prefix", "created_at", "last_used_at")

    def has_add_permission(self, request: object) -> bool:
        return False  # a key is made on the profile page, where it can be shown once
