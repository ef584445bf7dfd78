"""Projects, members and API keys: creating them, and authenticating a key per request."""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.models import ApiKey, Membership, Project, Role
from core.services.audit import record_audit
from core.text import text_problem

from .. import storage

KEY_PREFIX = "sb_"


def create_project(name: str) -> Project:
    return Project.objects.create(name=name)


def add_member(project: Project, user: User, role: str = Role.VIEWER) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": Role(role)}
    )
    return membership


def hash_secret(raw_key: str) -> str:
    # Keys carry 192 bits of randomness, so a fast unsalted hash is enough: no dictionary to
    # attack, and verification stays off the hot path's budget (unlike PBKDF2 per request).
    return hashlib.sha256(raw_key.encode()).hexdigest()


@transaction.atomic
def create_api_key(project: Project, *, name: str, actor: Actor) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is never stored and never shown again."""
    prefix = secrets.token_hex(4)
    raw_key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(24)}"
    api_key = ApiKey.objects.create(
        project=project,
        name=name,
        prefix=prefix,
        hashed_secret=hash_secret(raw_key),
        created_by=actor.user,
    )
    record_audit(
        project,
        actor=actor,
        action="api_key.create",
        target_type="api_key",
        target_id=api_key.pk,
        detail={"name": name, "prefix": prefix},
    )
    return api_key, raw_key


@transaction.atomic
def revoke_api_key(api_key: ApiKey, *, actor: Actor) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
        record_audit(
            api_key.project_id,
            actor=actor,
            action="api_key.revoke",
            target_type="api_key",
            target_id=api_key.pk,
            detail={"prefix": api_key.prefix},
        )
    return api_key


def authenticate_api_key(raw_key: str) -> ApiKey | None:
    """The active key matching `raw_key`, or None. Touches last_used_at at most once a minute."""
    if not raw_key.startswith(KEY_PREFIX) or text_problem(raw_key):
        return None  # a NUL in the header would reach the prefix look-up as a DataError
    prefix, _, _ = raw_key[len(KEY_PREFIX) :].partition("_")
    api_key = storage.active_key_with_project(prefix)
    if api_key is None or not hmac.compare_digest(api_key.hashed_secret, hash_secret(raw_key)):
        return None
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.SWITCHBOARD_KEY_TOUCH_SECONDS)
    if api_key.last_used_at is None or api_key.last_used_at < stale_before:
        # Conditional update: concurrent requests touch the row once, not once each.
        ApiKey.objects.filter(pk=api_key.pk).exclude(last_used_at__gte=stale_before).update(
            last_used_at=now
        )
        api_key.last_used_at = now
    return api_key
