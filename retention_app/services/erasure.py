"""Erasure of a data subject: an admin names the subject by selectors; a preview counts what
would go; a request freezes the matching sessions (and their forks) as the erasure's targets;
the job (tasks.erase_subject) removes them in bounded batches; a receipt remains.

Selectors (every one given must match a session): `metadata` {key, value} (as the sessions
list's `metadata.<key>=<value>`), `external_id`, `external_id_prefix`, `agent` (narrows only:
never alone), `fact` {key, value} (a `fact` event of the session's own log, any time).

Crash safety: each batch is one transaction that removes whole sessions: their events (through
the append-only guard's erasure hatch, erasure_storage.open_erasure_guard), every row that
cascades from them (snapshots, handoffs and their texts, blobs, task links, compactions, …) and
the session rows, hashing each into the receipt, marking the targets erased and
pseudonymising the audit entries about them. Killed anywhere, a batch rolls back whole: a
session is either readable and complete, or gone and answering 410 `erased` with the receipt's
id (sessions_app.access asks queries.erased_session). The next run takes up the targets still
pending. When none is left, one last transaction pseudonymises the audit entries and strips
the webhook delivery bodies that mention the subject, and seals the receipt (`done`: from
then on the database refuses any change to it, migration 0004).

Races: a batch locks its sessions FOR UPDATE (after the project FOR SHARE, as retention
does: a hold being placed waits for it). An append or a fork waiting on one of them finds it
gone (410); one committed before is erased with it (a fork made after the request becomes a
target when the batch finds it).
"""

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from celery import current_app  # type: ignore[import-untyped]
from django.conf import settings
from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish, publish_all
from core.errors import InvalidInput
from core.models import AuditEntry, DeliveryStatus, Project, WebhookDelivery
from core.services.audit import record_audit
from sessions_app.models import Session
from sessions_app.queries import metadata_matches
from sessions_app.services.artifacts import forget_session_files

from .. import erasure_storage, storage
from ..domain_events import RetentionChanged, SessionErased
from ..erasure_queries import counts_shown
from ..errors import ErasureHeld
from ..models import (
    ErasedObject,
    ErasureRequest,
    ErasureStatus,
    ErasureTarget,
    HoldScope,
    LegalHold,
    SessionTombstone,
)

logger = logging.getLogger(__name__)

ACTOR = Actor.system("erasure")
PSEUDONYM = "[erased]"
TASK_NAME = "retention_app.erase_subject"
# A batch takes sessions until their own events reach this many (at least one session): a
# transaction's size stays bounded whatever the spread of the subject.
BATCH_EVENTS = 20_000
BATCH_SESSIONS = 200
SELECTOR_TEXT_MAX = 200
# Kinds counted from other apps' rows: an app registers a step that gets (erasure id, session
# ids) inside the batch's transaction, before the rows go, and returns its counts per kind.
# For what lives outside the database and is not a cascading row (artifacts' rows cascade and
# are hashed like every row; their files go through forget_session_files).
ErasureStep = Callable[[UUID, list[UUID]], dict[str, int]]
EXTRA_STEPS: list[ErasureStep] = []


# --- Selectors ------------------------------------------------------------------------------


def _text(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > SELECTOR_TEXT_MAX:
        raise InvalidInput(
            f"`{name}` is a non-empty text of at most {SELECTOR_TEXT_MAX} characters.",
            detail={"selector": name},
        )
    return value


def _pair(raw: dict[str, Any], name: str, *, text_value: bool) -> dict[str, Any] | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"key", "value"}:
        raise InvalidInput(
            f"`{name}` is an object with exactly `key` and `value`.", detail={"selector": name}
        )
    _text(value, "key")
    subject = value["value"]
    if text_value:
        _text(value, "value")
    elif isinstance(subject, dict | list) or subject is None:
        raise InvalidInput(
            f"`{name}.value` is a JSON text, number or boolean.", detail={"selector": name}
        )
    elif isinstance(subject, str) and not subject.strip():
        raise InvalidInput(f"`{name}.value` is empty.", detail={"selector": name})
    return {"key": value["key"], "value": subject}


def parse_selectors(raw: Any) -> dict[str, Any]:
    """The selectors, checked (InvalidInput naming the problem): known names only, at least
    one that names a subject (an agent alone would be every session of it)."""
    if not isinstance(raw, dict) or not raw:
        raise InvalidInput("Name the subject with at least one selector.")
    unknown = sorted(set(raw) - {"metadata", "external_id", "external_id_prefix", "agent", "fact"})
    if unknown:
        raise InvalidInput(
            f"Unknown selector(s): {', '.join(unknown)}.", detail={"unknown": unknown}
        )
    selectors = {
        "metadata": _pair(raw, "metadata", text_value=True),
        "external_id": _text(raw, "external_id"),
        "external_id_prefix": _text(raw, "external_id_prefix"),
        "agent": _text(raw, "agent"),
        "fact": _pair(raw, "fact", text_value=False),
    }
    selectors = {k: v for k, v in selectors.items() if v is not None}
    if not set(selectors) - {"agent"}:
        raise InvalidInput(
            "Name the subject by a metadata value, an external_id (or its prefix) or a fact; "
            "an agent only narrows them.",
            detail={"selectors": sorted(selectors)},
        )
    return selectors


def subject_values(selectors: dict[str, Any]) -> list[str]:
    """The subject's own values in the selectors (what pseudonymisation replaces), longest
    first so a value containing another is replaced whole."""
    values = [
        selectors.get("external_id"),
        selectors.get("external_id_prefix"),
        (selectors.get("metadata") or {}).get("value"),
        (selectors.get("fact") or {}).get("value"),
    ]
    texts = {str(v) for v in values if v is not None and not isinstance(v, bool) and str(v)}
    return sorted(texts, key=lambda v: (-len(v), v))


def matching_sessions(project_id: int, selectors: dict[str, Any]) -> list[Session]:
    """The project's sessions every selector matches, then their forks (their history reads
    through them: the subject's data), generation by generation; oldest first."""
    qs = Session.objects.filter(project_id=project_id)
    if "external_id" in selectors:
        qs = qs.filter(external_id=selectors["external_id"])
    if "external_id_prefix" in selectors:
        qs = qs.filter(external_id__startswith=selectors["external_id_prefix"])
    if "agent" in selectors:
        qs = qs.filter(agent__name=selectors["agent"])
    if "metadata" in selectors:
        qs = qs.filter(
            metadata_matches(selectors["metadata"]["key"], selectors["metadata"]["value"])
        )
    if "fact" in selectors:
        fact = selectors["fact"]
        qs = qs.filter(
            pk__in=erasure_storage.sessions_with_fact(
                project_id, fact["key"], json.dumps(fact["value"])
            )
        )
    found = list(qs.select_related("agent").order_by("created_at", "pk"))
    seen = {s.pk for s in found}
    generation = found
    while generation:
        generation = [
            s
            for s in Session.objects.filter(parent_id__in=[s.pk for s in generation])
            .select_related("agent")
            .order_by("created_at", "pk")
            if s.pk not in seen
        ]
        seen.update(s.pk for s in generation)
        found.extend(generation)
    return found


def covering_holds(project_id: int, sessions: list[Session]) -> list[LegalHold]:
    """Every standing hold that covers one of `sessions`: theirs, their agents', the project's."""
    if not sessions:
        return []
    return list(
        LegalHold.objects.filter(project_id=project_id, released_at__isnull=True)
        .filter(
            Q(scope=HoldScope.SESSION, session_id__in=[s.pk for s in sessions])
            | Q(scope=HoldScope.AGENT, agent_id__in={s.agent_id for s in sessions})
            | Q(scope=HoldScope.PROJECT)
        )
        .select_related("agent")
        .order_by("pk")
    )


def hold_summary(hold: LegalHold) -> dict[str, Any]:
    return {
        "id": hold.pk,
        "scope": hold.scope,
        "session_id": str(hold.session_id) if hold.session_id else None,
        "agent": hold.agent.name if hold.agent_id and hold.agent else None,
        "reason": hold.reason,
    }


# --- Audit entries and deliveries that mention the subject ------------------------------------


# A value shorter than this is replaced only where it is a whole text ("42" stays inside a
# UUID or a count); a longer one wherever it occurs (an e-mail address inside a sentence).
SUBSTRING_MIN = 6


def _scrub(value: Any, needles: list[str]) -> Any:
    if isinstance(value, str):
        if value in needles:
            return PSEUDONYM
        for needle in needles:
            if len(needle) >= SUBSTRING_MIN:
                value = value.replace(needle, PSEUDONYM)
        return value
    if isinstance(value, list):
        return [_scrub(v, needles) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, needles) for k, v in value.items()}
    return value


def _sha(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _mentions(field_name: str, needles: list[str]) -> Q:
    """Rows whose JSON (annotated as `<field>_text`) holds a needle as _scrub replaces it: a
    short one as a whole JSON text, a long one anywhere."""
    match = Q(pk__in=[])
    for needle in needles:
        text = needle if len(needle) >= SUBSTRING_MIN else json.dumps(needle, ensure_ascii=False)
        match |= Q(**{f"{field_name}_text__contains": text})
    return match


def _audit_about(project_id: int, session_ids: list[UUID], needles: list[str]) -> Q:
    about = Q(target_type="session", target_id__in=[str(pk) for pk in session_ids])
    return about | _mentions("detail", needles) if needles else about


def _pseudonymise_audit(
    erasure: ErasureRequest, rows: Sequence[AuditEntry], needles: list[str]
) -> int:
    """Replace the subject's values in these audit entries' details (who did what, when, to
    which id stays); the hash of each detail before is kept in the receipt."""
    changed = []
    for entry in rows:
        scrubbed = _scrub(entry.detail, needles)
        if scrubbed != entry.detail:
            changed.append((entry, scrubbed))
    ErasedObject.objects.bulk_create(
        [
            ErasedObject(
                erasure=erasure, kind="audit_entry", ref=str(entry.pk), sha256=_sha(entry.detail)
            )
            for entry, _ in changed
        ]
    )
    for entry, scrubbed in changed:
        entry.detail = scrubbed
    AuditEntry.objects.bulk_update([entry for entry, _ in changed], ["detail"])
    return len(changed)


def _session_needles(sessions: list[Session], base: list[str]) -> list[str]:
    extra = {s.external_id for s in sessions if s.external_id} | {
        s.title for s in sessions if s.title
    }
    return sorted(set(base) | extra, key=lambda v: (-len(v), v))


# --- Preview --------------------------------------------------------------------------------


@dataclass
class ErasurePreview:
    selectors: dict[str, Any]
    sessions: list[Session]
    counts: dict[str, int]
    holds: list[LegalHold] = field(default_factory=list)

    def as_dict(self, *, sessions_shown: int = 100) -> dict[str, Any]:
        return {
            "selectors": self.selectors,
            "counts": self.counts,
            "session_ids": [str(s.pk) for s in self.sessions[:sessions_shown]],
            "holds": [hold_summary(h) for h in self.holds],
        }


def preview_erasure(project: Project | int, raw_selectors: Any) -> ErasurePreview:
    """What an erasure with these selectors would remove now, counted per kind, and the holds
    that would refuse it. Reads only."""
    project_id = project.pk if isinstance(project, Project) else project
    selectors = parse_selectors(raw_selectors)
    sessions = matching_sessions(project_id, selectors)
    ids = [s.pk for s in sessions]
    counts = counts_shown(erasure_storage.count_session_rows(ids))
    counts.setdefault("artifacts", 0)
    needles = _session_needles(sessions, subject_values(selectors))
    counts["audit_entries"] = (
        AuditEntry.objects.filter(project_id=project_id)
        .annotate(detail_text=Cast("detail", TextField()))
        .filter(_audit_about(project_id, ids, needles))
        .count()
    )
    counts["webhook_deliveries"] = _deliveries(project_id, ids, subject_values(selectors)).count()
    return ErasurePreview(selectors, sessions, counts, covering_holds(project_id, sessions))


def _deliveries(project_id: int, session_ids: list[UUID], needles: list[str]) -> Any:
    about = Q(payload__session_id__in=[str(pk) for pk in session_ids]) | _mentions(
        "payload", needles
    )
    return (
        WebhookDelivery.objects.filter(project_id=project_id)
        .exclude(payload__has_key="erased")
        .annotate(payload_text=Cast("payload", TextField()))
        .filter(about)
    )


# --- Request --------------------------------------------------------------------------------


class JobsUnavailable(InvalidInput):
    status = 503
    code = "jobs_unavailable"
    retry_after = 30


def request_erasure(project: Project, raw_selectors: Any, *, actor: Actor) -> ErasureRequest:
    """Record an erasure (status queued) with its targets frozen, audited, and queue the job.

    Locks the project row FOR SHARE (a hold being placed waits; every hold committed before
    is seen). Raises InvalidInput (bad selectors), ErasureHeld (409: standing holds cover
    matching sessions; nothing recorded), JobsUnavailable (503: recorded but not queued;
    POST …/run queues it again)."""
    selectors = parse_selectors(raw_selectors)
    with transaction.atomic():
        storage.share_project(project.pk)
        sessions = matching_sessions(project.pk, selectors)
        holds = covering_holds(project.pk, sessions)
        if holds:
            raise ErasureHeld(
                f"{len(holds)} legal hold(s) cover sessions of this subject: nothing is erased "
                "while they stand. An admin can lift them.",
                detail={"holds": [hold_summary(h) for h in holds]},
            )
        erasure = ErasureRequest.objects.create(
            project=project, selectors=selectors, requested_by=actor.label
        )
        ErasureTarget.objects.bulk_create(
            [ErasureTarget(erasure=erasure, project=project, session_id=s.pk) for s in sessions]
        )
        record_audit(
            project,
            actor=actor,
            action="erasure.request",
            target_type="erasure",
            target_id=erasure.pk,
            detail={"sessions": len(sessions)},
        )
        publish(RetentionChanged(project_id=project.pk, what="erasure", id=str(erasure.pk)))
    queue_erasure(erasure)
    return erasure


def queue_erasure(erasure: ErasureRequest) -> None:
    """Send the job for `erasure` (after its rows committed: the worker must find them)."""
    try:
        current_app.send_task(
            TASK_NAME,
            kwargs={"erasure_id": str(erasure.pk)},
            queue=settings.SWITCHBOARD_RETENTION_QUEUE,
            retry=False,
        )
    except Exception as exc:  # kombu's OperationalError, a refused or unreachable socket …
        logger.warning("erasure %s not queued: %r", erasure.pk, exc)
        raise JobsUnavailable(
            "The erasure is recorded but the job queue is unavailable: run it again later.",
            detail={"erasure_id": str(erasure.pk)},
        ) from exc


# --- The job --------------------------------------------------------------------------------


def erase_sessions_locked(erasure: ErasureRequest, sessions: list[Session]) -> dict[str, int]:
    """Remove these locked sessions whole (no fork of them left outside), hashing each row into
    the receipt; pseudonymise the audit entries about them; mark their targets erased. In the
    caller's transaction. The counts per kind (model names)."""
    ids = [s.pk for s in sessions]
    counts: dict[str, int] = {}
    for step in EXTRA_STEPS:
        for kind, n in step(erasure.pk, ids).items():
            counts[kind] = counts.get(kind, 0) + n
    # Their artifacts' files go once this commits (the rows cascade below, each hashed).
    forget_session_files(ids)
    erasure_storage.open_erasure_guard(erasure.pk)
    for kinds in (
        erasure_storage.erase_events(erasure.pk, ids),
        erasure_storage.erase_session_rows(erasure.pk, ids),
    ):
        for kind, n in kinds.items():
            counts[kind] = counts.get(kind, 0) + n
    erasure_storage.close_erasure_guard()
    needles = _session_needles(sessions, subject_values(erasure.selectors))
    about = list(
        AuditEntry.objects.select_for_update()
        .filter(
            project_id=erasure.project_id,
            target_type="session",
            target_id__in=[str(pk) for pk in ids],
        )
        .order_by("pk")
    )
    counts["audit_entry"] = _pseudonymise_audit(erasure, about, needles)
    ErasureTarget.objects.filter(erasure=erasure, session_id__in=ids).update(
        erased_at=timezone.now()
    )
    publish_all(
        [
            SessionErased(
                project_id=s.project_id, session_id=str(s.pk), external_id=None, actor=ACTOR.label
            )
            for s in sessions
        ]
    )
    return counts


def _merge(erasure: ErasureRequest, kinds: dict[str, int]) -> None:
    counts = dict(erasure.counts)
    for kind, n in kinds.items():
        counts[kind] = counts.get(kind, 0) + n
    erasure.counts = counts


HELD = -1


def erase_batch(erasure_id: UUID, *, batch_events: int = BATCH_EVENTS) -> int:
    """One batch, one transaction: the sessions erased (0: none left; HELD: a hold stopped the
    erasure, which is marked `held` listing the holds)."""
    with transaction.atomic():
        # The erasure's row serialises its batches (several workers take turns) and keeps it
        # `running` while this batch deletes (the guard trigger checks that status).
        erasure = ErasureRequest.objects.select_for_update().get(pk=erasure_id)
        if erasure.status != ErasureStatus.RUNNING:
            return 0
        storage.commit_without_waiting_for_flush()
        storage.share_project(erasure.project_id)
        pending = list(
            ErasureTarget.objects.filter(erasure=erasure, erased_at__isnull=True)
            .order_by("session_id")
            .values_list("session_id", flat=True)[:BATCH_SESSIONS]
        )
        if not pending:
            return 0
        weights = dict(Session.objects.filter(pk__in=pending).values_list("pk", "head_seq"))
        chosen: list[UUID] = []
        total = 0
        for pk in pending:
            if chosen and total + weights.get(pk, 0) > batch_events:
                break
            chosen.append(pk)
            total += weights.get(pk, 0)
        sessions = _locked(Session.objects.filter(pk__in=chosen, project_id=erasure.project_id))
        gone = set(chosen) - {s.pk for s in sessions}
        if gone:  # deleted meanwhile (by retention, DELETE /sessions, or another erasure)
            ErasureTarget.objects.filter(erasure=erasure, session_id__in=gone).update(
                erased_at=timezone.now()
            )
        generation = sessions
        while generation:
            # Forks made since the request: locked after their parents (a new fork waits on
            # its parent's row), and made targets before their events go (the guard checks).
            generation = _locked(Session.objects.filter(parent_id__in=[s.pk for s in generation]))
            sessions.extend(generation)
        ErasureTarget.objects.bulk_create(
            [
                ErasureTarget(erasure=erasure, project_id=erasure.project_id, session_id=s.pk)
                for s in sessions
            ],
            ignore_conflicts=True,
        )
        holds = covering_holds(erasure.project_id, sessions)
        if holds:
            erasure.status = ErasureStatus.HELD
            erasure.holds = [hold_summary(h) for h in holds]
            erasure.save(update_fields=["status", "holds"])
            publish(
                RetentionChanged(project_id=erasure.project_id, what="erasure", id=str(erasure.pk))
            )
            return HELD
        if sessions:
            _merge(erasure, erase_sessions_locked(erasure, sessions))
            erasure.save(update_fields=["counts"])
        return len(sessions) + len(gone)


def _locked(query: Any) -> list[Session]:
    return list(
        query.select_related("agent").select_for_update(of=("self",)).order_by("created_at", "pk")
    )


def start_erasure(erasure_id: UUID) -> ErasureRequest | None:
    """Mark the erasure running (from queued, or held once its holds are lifted); None if it
    does not exist. A done one is returned as it is."""
    with transaction.atomic():
        erasure = ErasureRequest.objects.select_for_update().filter(pk=erasure_id).first()
        if erasure is None or erasure.status in (ErasureStatus.DONE, ErasureStatus.RUNNING):
            return erasure
        erasure.status = ErasureStatus.RUNNING
        erasure.started_at = erasure.started_at or timezone.now()
        erasure.holds = []
        erasure.save(update_fields=["status", "started_at", "holds"])
        publish(RetentionChanged(project_id=erasure.project_id, what="erasure", id=str(erasure.pk)))
    return erasure


def finish_erasure(erasure_id: UUID) -> ErasureRequest:
    """The last step, once no target is pending: pseudonymise the audit entries that mention
    the subject's values, strip the webhook delivery bodies that name an erased session or a
    value (a pending one is not sent), pseudonymise retention's tombstones of earlier deleted
    sessions of the subject, and seal the receipt (done)."""
    with transaction.atomic():
        erasure = ErasureRequest.objects.select_for_update().get(pk=erasure_id)
        if erasure.status != ErasureStatus.RUNNING:
            return erasure
        if ErasureTarget.objects.filter(erasure=erasure, erased_at__isnull=True).exists():
            return erasure
        ids = list(
            ErasureTarget.objects.filter(erasure=erasure).values_list("session_id", flat=True)
        )
        values = subject_values(erasure.selectors)
        kinds: dict[str, int] = {}
        if values:
            rows = list(
                AuditEntry.objects.select_for_update(of=("self",))
                .filter(project_id=erasure.project_id)
                .annotate(detail_text=Cast("detail", TextField()))
                .filter(_mentions("detail", values))
                .order_by("pk")
            )
            kinds["audit_entry"] = _pseudonymise_audit(erasure, rows, values)
        deliveries = list(
            _deliveries(erasure.project_id, ids, values)
            .select_for_update(of=("self",))
            .order_by("pk")
        )
        ErasedObject.objects.bulk_create(
            [
                ErasedObject(
                    erasure=erasure, kind="webhook_delivery", ref=str(d.pk), sha256=_sha(d.payload)
                )
                for d in deliveries
            ]
        )
        for delivery in deliveries:
            delivery.payload = {"erased": str(erasure.pk)}
            if delivery.status == DeliveryStatus.PENDING:
                delivery.status = DeliveryStatus.FAILED
                delivery.next_attempt_at = None
                delivery.last_error = "erased"
        WebhookDelivery.objects.bulk_update(
            deliveries, ["payload", "status", "next_attempt_at", "last_error"]
        )
        kinds["webhook_delivery"] = len(deliveries)
        tombstones = _tombstones(erasure)
        kinds["tombstone"] = len(tombstones)
        _merge(erasure, kinds)
        erasure.counts = counts_shown(dict(erasure.counts))
        erasure.counts.setdefault("artifacts", 0)
        erasure.status = ErasureStatus.DONE
        erasure.finished_at = timezone.now()
        erasure.save(update_fields=["counts", "status", "finished_at"])
        record_audit(
            erasure.project_id,
            actor=ACTOR,
            action="erasure.done",
            target_type="erasure",
            target_id=erasure.pk,
            detail={"requested_by": erasure.requested_by, "counts": erasure.counts},
        )
        publish(RetentionChanged(project_id=erasure.project_id, what="erasure", id=str(erasure.pk)))
    return erasure


def _tombstones(erasure: ErasureRequest) -> list[SessionTombstone]:
    selectors = erasure.selectors
    match = Q(pk__in=[])
    if "external_id" in selectors:
        match |= Q(external_id=selectors["external_id"])
    if "external_id_prefix" in selectors:
        match |= Q(external_id__startswith=selectors["external_id_prefix"])
    rows = list(
        SessionTombstone.objects.select_for_update()
        .filter(project_id=erasure.project_id)
        .filter(match)
        .order_by("pk")
    )
    ErasedObject.objects.bulk_create(
        [
            ErasedObject(
                erasure=erasure,
                kind="tombstone",
                ref=str(t.pk),
                sha256=_sha({"external_id": t.external_id, "title": t.title}),
            )
            for t in rows
        ]
    )
    SessionTombstone.objects.filter(pk__in=[t.pk for t in rows]).update(external_id=None, title="")
    return rows


def run_erasure(
    erasure_id: UUID,
    *,
    batch_events: int = BATCH_EVENTS,
    max_batches: int | None = None,
    time_budget: float | None = None,
) -> ErasureRequest | None:
    """The whole job, safe to run again at any point: start, batches until none is left (or a
    hold stops it, or `max_batches` or `time_budget` seconds are spent: then it stays
    `running` and the caller runs it again), then the last step. None if there is no such
    erasure."""
    erasure = start_erasure(erasure_id)
    if erasure is None or erasure.status != ErasureStatus.RUNNING:
        return erasure
    deadline = None if time_budget is None else time.monotonic() + time_budget
    done = 0
    while max_batches is None or done < max_batches:
        if deadline is not None and done and time.monotonic() > deadline:
            break
        erased = erase_batch(erasure.pk, batch_events=batch_events)
        if erased == HELD:
            return ErasureRequest.objects.get(pk=erasure.pk)
        if erased == 0:
            return finish_erasure(erasure.pk)
        done += 1
    return ErasureRequest.objects.get(pk=erasure.pk)
