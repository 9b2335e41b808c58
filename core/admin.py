from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest

from core.audit import AuditAction, record
from core.models import ApiToken, AuditEvent
from core.roles import user_role


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

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        with transaction.atomic():
            was_revoked = ApiToken.objects.filter(pk=obj.pk, revoked_at__isnull=False).exists()
            super().save_model(request, obj, form, change)
            if obj.revoked_at is not None and not was_revoked:
                record(request.user, AuditAction.TOKEN_REVOKE, obj, name=obj.name, prefix=obj.prefix, by="admin")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    # The log is kept as written: readable here, never added, changed or deleted.
    list_display = ("created_at", "actor_name", "action", "target_type", "target_id", "target_label")
    list_filter = ("action",)
    search_fields = ("actor_name", "target_label", "target_id")
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class AuditedUserAdmin(UserAdmin):  # type: ignore[type-arg]
    """Django's user admin, with role changes (groups, superuser) written to the audit log.

    The groups are saved after the user row (save_related), so the role before is read in
    save_model and the one after in save_related, all inside the admin's one transaction.
    """

    def save_model(self, request: HttpRequest, obj: User, form: Any, change: bool) -> None:
        before = user_role(User.objects.get(pk=obj.pk)) if change and obj.pk else None
        request._crucible_role_before = before  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        user = form.instance
        before = getattr(request, "_crucible_role_before", None)
        after = user_role(User.objects.get(pk=user.pk))  # fresh: user_role caches on the instance
        if before != after:
            record(request.user, AuditAction.ROLE_CHANGE, user, before=before, after=after, by="admin")


admin.site.unregister(User)
admin.site.register(User, AuditedUserAdmin)
