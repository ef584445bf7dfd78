"""Projects and API keys: creating, renaming and revoking them, and authenticating a key per
request (members: core.services.members)."""

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import Conflict, InvalidInput, NotFound
from core.models import ApiKey, KeyScope, Membership, Project, Role
from core.services.audit import record_audit
from core.text import text_problem

from .. import keycache, storage

KEY_PREFIX = "sb_"


PROJECT_NAME_MAX = Project._meta.get_field("name").max_length or 100
KEY_NAME_MAX = ApiKey._meta.get_field("name").max_length or 100


def _clean_name(name: str, what: str, limit: int) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise InvalidInput(f"The {what} cannot be empty.", detail={"field": "name"})
    if len(cleaned) > limit:
        raise InvalidInput(
            f"The {what} is {len(cleaned)} characters; at most {limit} are allowed.",
            detail={"field": "name", "limit": limit},
        )
    if text_problem(cleaned):
        raise InvalidInput(f"The {what} holds a character that cannot be stored.")
    return cleaned


@transaction.atomic
def create_project(name: str, *, creator: User | None = None) -> Project:
    """A new project; its creator (when a person made it) becomes its first admin."""
    name = _clean_name(name, "project name", PROJECT_NAME_MAX)
    if Project.objects.filter(name=name).exists():
        raise Conflict(f"A project named {name!r} already exists.", detail={"name": name})
    project = Project.objects.create(name=name)
    if creator is not None:
        Membership.objects.create(project=project, user=creator, role=Role.ADMIN)
        record_audit(
            project,
            actor=Actor.for_user(creator),
            action="project.create",
            target_type="project",
            target_id=project.pk,
            detail={"name": name},
        )
    return project


@transaction.atomic
def rename_project(project: Project, *, name: str, actor: Actor) -> Project:
    """Rename `project` (names are unique); audited with the old and the new name."""
    name = _clean_name(name, "project name", PROJECT_NAME_MAX)
    locked = Project.objects.select_for_update().get(pk=project.pk)
    if locked.name == name:
        return locked
    if Project.objects.filter(name=name).exclude(pk=project.pk).exists():
        raise Conflict(f"A project named {name!r} already exists.", detail={"name": name})
    old = locked.name
    locked.name = name
    locked.save(update_fields=["name"])
    record_audit(
        locked,
        actor=actor,
        action="project.rename",
        target_type="project",
        target_id=locked.pk,
        detail={"from": old, "to": name},
    )
    project.name = name
    return locked


def add_member(project: Project, user: User, role: str = Role.VIEWER) -> Membership:
    """Set `user`'s role in `project`, adding them if needed (fixtures, demo data, benches).

    Unaudited and unchecked: people go through core.services.members instead."""
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": Role(role)}
    )
    return membership


def hash_secret(raw_key: str) -> str:
    # Keys carry 192 bits of randomness, so a fast unsalted hash is enough: no dictionary to
    # attack, and verification stays off the hot path's budget (unlike PBKDF2 per request).
    return hashlib.sha256(raw_key.encode()).hexdigest()


@transaction.atomic
def create_api_key(
    project: Project,
    *,
    name: str,
    actor: Actor,
    scope: str = KeyScope.AGENT,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is never stored and never shown again.

    Raises InvalidInput for an empty or overlong name, an unknown scope, or an expiry that is
    not in the future (nothing is written then)."""
    name = _clean_name(name, "key name", KEY_NAME_MAX)
    if scope not in KeyScope.values:
        raise InvalidInput(
            f"Unknown scope {scope!r}; use one of: {', '.join(KeyScope.values)}.",
            detail={"field": "scope", "allowed": KeyScope.values},
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput(
            "The expiry must be in the future.",
            detail={"field": "expires_at", "expires_at": expires_at.isoformat()},
        )
    prefix = secrets.token_hex(4)
    raw_key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(24)}"
    api_key = ApiKey.objects.create(
        project=project,
        name=name,
        prefix=prefix,
        hashed_secret=hash_secret(raw_key),
        created_by=actor.user,
        scope=KeyScope(scope),
        expires_at=expires_at,
    )
    record_audit(
        project,
        actor=actor,
        action="api_key.create",
        target_type="api_key",
        target_id=api_key.pk,
        detail={
            "name": name,
            "prefix": prefix,
            "scope": str(scope),
            "expires_at": expires_at.isoformat() if expires_at else None,
        },
    )
    return api_key, raw_key


def api_key_in(project: Project | int, key_id: int) -> ApiKey:
    """The project's key `key_id`; another project's (or none) is NotFound (404)."""
    project_id = project.pk if isinstance(project, Project) else project
    api_key = (
        ApiKey.objects.filter(pk=key_id, project_id=project_id).first()
        if 0 < key_id < 2**63
        else None
    )
    if api_key is None:
        raise NotFound("API key not found.")
    return api_key


class OwnKey(Conflict):
    """A key asked to revoke itself: refused, so that no automation locks itself out by
    mistake (rotate by creating the new key, then revoking the old one with it)."""

    code = "own_key"


@transaction.atomic
def revoke_api_key(api_key: ApiKey, *, actor: Actor) -> ApiKey:
    """Revoke the key (a no-op if it already is). Every server process confirms its cached keys
    on each request (core.keycache: a new epoch after this commits), so the next request with
    it answers 401 wherever it lands. A key acting on itself is refused (OwnKey, 409)."""
    if actor.api_key is not None and actor.api_key.pk == api_key.pk:
        raise OwnKey(
            "A key cannot revoke itself: revoke it with another admin key or on the dashboard.",
            detail={"id": api_key.pk, "prefix": api_key.prefix},
        )
    # Conditional update: two admins revoking at once write one revocation and one audit row.
    now = timezone.now()
    changed = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=now)
    if changed:
        keycache.keys_changed()
        api_key.revoked_at = now
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
    return authenticate_api_key_counted(raw_key)[0]


def authenticate_api_key_counted(
    raw_key: str, *, count: tuple[str, int] | None = None, count_scope: str | None = None
) -> tuple[ApiKey | None, int | None]:
    """authenticate_api_key(), and with `count` (a rate-limit counter key and its timeout) the
    counter's new value when the key was confirmed from this process's cache (core.keycache:
    one Redis round trip both confirms and counts); None when it was not counted here. Only a
    key with at least `count_scope` is counted (a request refused for its scope is not)."""
    if not raw_key.startswith(KEY_PREFIX) or text_problem(raw_key):
        return None, None  # a NUL in the header would reach the prefix look-up as a DataError
    prefix, _, _ = raw_key[len(KEY_PREFIX) :].partition("_")
    hashed = hash_secret(raw_key)
    counted = None
    api_key = None
    entry = keycache.lookup(prefix, hashed)
    if entry is not None:
        candidate = entry.build()
        wanted = count if count_scope is None or candidate.has_scope(count_scope) else None
        try:
            current, counted = keycache.confirm(entry, wanted)
        except Exception:
            current = False  # Redis failed: read the database, as without a cache
        if current:
            api_key = candidate
    if api_key is None:
        epoch = keycache.epoch_before_lookup()
        api_key = storage.active_key_with_project(prefix)
        if api_key is None or not hmac.compare_digest(api_key.hashed_secret, hashed):
            return None, counted
        keycache.remember(prefix, api_key, epoch)
    now = timezone.now()
    if api_key.expires_at is not None and api_key.expires_at <= now:
        return None, counted
    stale_before = now - timedelta(seconds=settings.SWITCHBOARD_KEY_TOUCH_SECONDS)
    if api_key.last_used_at is None or api_key.last_used_at < stale_before:
        # Conditional update: concurrent requests touch the row once, not once each.
        ApiKey.objects.filter(pk=api_key.pk).exclude(last_used_at__gte=stale_before).update(
            last_used_at=now
        )
        api_key.last_used_at = now
        keycache.touched(prefix, now)
    return api_key, counted
