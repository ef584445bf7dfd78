"""Every step of a handoff, from the agent's request to the hand-back (DESIGN.md "Handoff").

Each function opens its own transaction (or joins the caller's), locks the handoff row (claims:
a conditional UPDATE, so exactly one wins — invariant 7), validates, writes, and records the
step (services.records: the `handoff` log event, the audit entry, the outboxed domain event).
Lock order everywhere: handoff row, then session row. The lease holder is the only person who
acts on a claimed handoff; role checks (operator to act, admin to reassign) are repeated here
so no face can forget them.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.access import require_role
from core.actors import Actor
from core.domain_events import publish
from core.errors import InvalidInput
from core.models import Role
from core.services.audit import record_audit
from core.text import check_storable
from sessions_app.errors import SessionNotWritable
from sessions_app.models import WRITABLE_STATUSES, EventKind, Session, SessionStatus
from sessions_app.services.control import set_budget, set_taken_over
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import transition_locked

from ..domain_events import (
    HandoffAnswered,
    HandoffCancelled,
    HandoffClaimed,
    HandoffClosed,
    HandoffCreated,
    HandoffHandedBack,
    HandoffIgnored,
    HandoffReassigned,
    HandoffReleased,
    HandoffTakenOver,
    HandoffWorked,
)
from ..errors import HandoffAlreadyClaimed, HandoffAlreadyOpen, HandoffNotActive
from ..models import (
    ACTIVE_STATUSES,
    LEASED_STATUSES,
    Handoff,
    HandoffKind,
    HandoffStatus,
    Priority,
)
from .args_schema import check_args, schema_of
from .records import (
    event_fields,
    holder_label,
    lock_handoff,
    lock_session,
    record_step,
    require_holder,
    sla_for,
)
from .validation import (
    check_answer_allowed,
    validate_due_in,
    validate_kind,
    validate_payload,
    validate_priority,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_REASON = 1000
MAX_TEXT = 20_000


@dataclass
class RequestResult:
    handoff: Handoff
    created: bool  # False: the idempotency key's original was returned


def _refresh(target: Handoff, source: Handoff) -> Handoff:
    """Copy the locked row's fields onto the caller's instance, and return it."""
    for field in Handoff._meta.concrete_fields:
        setattr(target, field.attname, getattr(source, field.attname))
    target.session = source.session
    target.lease_holder = source.lease_holder
    return target


def _check_reason(reason: str) -> None:
    if len(reason) > MAX_REASON:
        raise InvalidInput(
            f"reason holds at most {MAX_REASON} characters.", detail={"field": "reason"}
        )
    check_storable(reason, field="reason")


# --- Request -----------------------------------------------------------------------------


def _resolve(locked: Handoff, status: str) -> None:
    """End a locked handoff in `status`: resolved now, no lease left."""
    locked.status = status
    locked.resolved_at = timezone.now()
    locked.lease_expires_at = None
    locked.save(update_fields=["status", "resolved_at", "lease_expires_at", "updated_at"])


def _end_and_resume(
    locked: Handoff, session: Session, status: str, *, actor: Actor, why: str, reason: str = ""
) -> None:
    """End the locked handoff in `status`; its session, if the request paused it, resumes."""
    _resolve(locked, status)
    if session.status == SessionStatus.PAUSED:
        _move_session(session, SessionStatus.RESUMED, locked, actor=actor, why=why, reason=reason)


def _move_session(
    session: Session, to: str, handoff: Handoff, *, actor: Actor, why: str, reason: str = ""
) -> None:
    """Move the locked session, its lifecycle record naming the handoff that moved it."""
    transition_locked(
        session,
        to,
        actor=actor,
        reason=f"{why}: {reason}" if reason else why,
        detail={"handoff_id": str(handoff.pk)},
    )


def request_handoff_locked(
    session: Session,
    *,
    kind: str,
    reason: str,
    payload: dict[str, Any],
    priority: str,
    due_in: int | None,
    idempotency_key: str | None,
    actor: Actor,
) -> Handoff:
    """Open a handoff on `session`, whose row the caller has locked in its transaction; pause
    the session if it runs (a lifecycle event naming the handoff). No validation of `kind`
    beyond the model's (the budget guard opens `budget` handoffs through here)."""
    if session.status not in WRITABLE_STATUSES:
        raise SessionNotWritable(
            f"The session is {session.status}; it cannot ask for a person.",
            detail={"status": session.status},
        )
    active = Handoff.objects.filter(session_id=session.pk, status__in=ACTIVE_STATUSES).first()
    if active is not None:
        raise HandoffAlreadyOpen(
            "The session already has an open handoff.",
            detail={"handoff_id": str(active.pk), "status": active.status},
        )
    sla = sla_for(session.project_id)
    now = timezone.now()
    due = validate_due_in(due_in) or sla.due_after(kind)
    handoff = Handoff.objects.create(
        project_id=session.project_id,
        session=session,
        kind=kind,
        reason=reason,
        payload=payload,
        priority=validate_priority(priority),
        due_at=now + due,
        expires_at=now + due + sla.expire_after,
        idempotency_key=idempotency_key,
        requested_by=actor.label,
    )
    if session.status in (SessionStatus.OPEN, SessionStatus.RESUMED):
        _move_session(
            session,
            SessionStatus.PAUSED,
            handoff,
            actor=actor,
            why="handoff requested",
            reason=reason,
        )
    record_step(
        handoff,
        "requested",
        actor=actor,
        detail={"reason": reason, "priority": handoff.priority_name},
        event=HandoffCreated(
            **event_fields(handoff, actor),
            reason=reason,
            request=payload,
            due_at=handoff.due_at.isoformat(),
        ),
    )
    return handoff


def request_handoff(
    session: Session,
    *,
    kind: str,
    reason: str = "",
    payload: dict[str, Any] | None = None,
    priority: str = "normal",
    due_in: int | None = None,
    idempotency_key: str | None = None,
    actor: Actor,
) -> RequestResult:
    """An agent asks for a person. Validates kind (question/approval/takeover), payload,
    priority and due_in (InvalidInput, 422); pauses the session in the same transaction.
    Raises HandoffAlreadyOpen (409) when the session has an active handoff,
    SessionNotWritable (409) when it is closed. The same idempotency_key answers the original
    (created False), also when a concurrent retry won the race."""
    validated_kind = validate_kind(kind)
    body = validate_payload(validated_kind, payload if payload is not None else {})
    validate_priority(priority)
    validate_due_in(due_in)
    _check_reason(reason)
    if idempotency_key is not None:
        check_storable(idempotency_key, field="idempotency_key")
    for attempt in range(2):
        if idempotency_key is not None:
            original = Handoff.objects.filter(
                session_id=session.pk, idempotency_key=idempotency_key
            ).first()
            if original is not None:
                return RequestResult(original, created=False)
        try:
            with transaction.atomic():
                locked = (
                    Session.objects.select_for_update()
                    .filter(pk=session.pk, project_id=session.project_id)
                    .get()
                )
                handoff = request_handoff_locked(
                    locked,
                    kind=validated_kind,
                    reason=reason,
                    payload=body,
                    priority=priority,
                    due_in=due_in,
                    idempotency_key=idempotency_key,
                    actor=actor,
                )
        except IntegrityError:
            # A concurrent request won: the same key (its original is found above) or
            # another active handoff (the second attempt explains it).
            if attempt == 1:
                raise
            continue
        session.status = locked.status
        session.head_seq = locked.head_seq
        return RequestResult(handoff, created=True)
    raise AssertionError("unreachable")


# --- Claims and leases -------------------------------------------------------------------

LEASE_ACTOR = Actor.system("handoff-lease")


def _lapsed(locked: Handoff, now: Any) -> bool:
    """Claimed or taken over under a lease that ran out (an answered one is handed back by
    the lease job instead: the agent has its answer)."""
    return (
        locked.status in (HandoffStatus.CLAIMED, HandoffStatus.TAKEN_OVER)
        and locked.lease_expires_at is not None
        and locked.lease_expires_at <= now
    )


def claim_handoff(handoff: Handoff, *, user: "User") -> Handoff:
    """Claim an open handoff for `user` (an operator of its project) under a lease. A claim
    whose lease ran out (not yet swept by the lease job) is lapsed first, as the job would.

    Invariant 7: the claim is one conditional UPDATE (`status = 'open'`), so of any number of
    concurrent claims exactly one changes the row; the others raise HandoffAlreadyClaimed (409)
    naming the holder (or HandoffNotActive when it is no longer waiting at all).
    """
    require_role(user, handoff.project_id, Role.OPERATOR)
    actor = Actor.for_user(user)
    sla = sla_for(handoff.project_id)
    with transaction.atomic():
        now = timezone.now()

        def take() -> bool:
            return bool(
                Handoff.objects.filter(pk=handoff.pk, status=HandoffStatus.OPEN).update(
                    status=HandoffStatus.CLAIMED,
                    lease_holder=user,
                    lease_expires_at=now + sla.lease,
                    claimed_at=now,
                    updated_at=now,
                )
            )

        won = take()
        locked = lock_handoff(handoff.pk)
        if not won and _lapsed(locked, now):
            # A lease that ran out before the lease job swept it: lapse it here (the same
            # record and event as the job's), so a lost claim can be taken at once.
            return_to_queue_locked(locked, actor=LEASE_ACTOR, lapsed=True)
            won = take()
            locked = lock_handoff(handoff.pk)
        if not won:
            if locked.status in LEASED_STATUSES:
                raise HandoffAlreadyClaimed(
                    f"{holder_label(locked)} holds this handoff.",
                    detail={
                        "holder": holder_label(locked),
                        "status": locked.status,
                        "lease_expires_at": (
                            locked.lease_expires_at.isoformat() if locked.lease_expires_at else None
                        ),
                    },
                )
            raise HandoffNotActive(
                f"The handoff is {locked.status}; it cannot be claimed.",
                detail={"status": locked.status},
            )
        assert locked.lease_expires_at is not None
        record_step(
            locked,
            "claimed",
            actor=actor,
            detail={"lease_expires_at": locked.lease_expires_at.isoformat()},
            event=HandoffClaimed(
                **event_fields(locked, actor),
                lease_expires_at=locked.lease_expires_at.isoformat(),
            ),
        )
    return _refresh(handoff, locked)


def renew_lease(handoff: Handoff, *, user: "User") -> Handoff:
    """Extend the holder's live lease by the project's lease time (the workspace calls this
    while it is open). A heartbeat: no log record. NotLeaseHolder (409) for anyone else or a
    lapsed lease."""
    sla = sla_for(handoff.project_id)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        now = timezone.now()
        require_holder(locked, user, now=now)
        locked.lease_expires_at = now + sla.lease
        locked.save(update_fields=["lease_expires_at", "updated_at"])
    return _refresh(handoff, locked)


def release_handoff(handoff: Handoff, *, user: "User", reason: str = "") -> Handoff:
    """The holder puts a claimed (or taken-over) handoff back in the queue; a take-over ends
    (the agent may write again). An answered one is handed back or closed instead."""
    _check_reason(reason)
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        if locked.status == HandoffStatus.ANSWERED:
            raise HandoffNotActive(
                "The handoff is answered: hand it back or close it.",
                detail={"status": locked.status},
            )
        return_to_queue_locked(locked, actor=actor, lapsed=False, reason=reason)
    return _refresh(handoff, locked)


def return_to_queue_locked(
    locked: Handoff, *, actor: Actor, lapsed: bool, reason: str = ""
) -> None:
    previous = holder_label(locked)
    session = lock_session(locked)
    if locked.status == HandoffStatus.TAKEN_OVER and session.taken_over_by:
        set_taken_over(session, holder="", actor=actor)
    locked.status = HandoffStatus.OPEN
    locked.lease_holder = None
    locked.lease_expires_at = None
    locked.save(update_fields=["status", "lease_holder", "lease_expires_at", "updated_at"])
    record_step(
        locked,
        "lease_expired" if lapsed else "released",
        actor=actor,
        detail={"previous_holder": previous, "reason": reason},
        event=HandoffReleased(**event_fields(locked, actor), lapsed=lapsed),
    )


def reassign_handoff(handoff: Handoff, *, to_user: "User", user: "User") -> Handoff:
    """An admin gives an active handoff to `to_user` (an operator of the project) with a fresh
    lease; a taken-over session follows its new holder."""
    require_role(user, handoff.project_id, Role.ADMIN)
    require_role(to_user, handoff.project_id, Role.OPERATOR)
    actor = Actor.for_user(user)
    sla = sla_for(handoff.project_id)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        if locked.status not in ACTIVE_STATUSES:
            raise HandoffNotActive(
                f"The handoff is {locked.status}; it cannot be reassigned.",
                detail={"status": locked.status},
            )
        previous = holder_label(locked)
        now = timezone.now()
        if locked.status == HandoffStatus.OPEN:
            locked.status = HandoffStatus.CLAIMED
            locked.claimed_at = now
        locked.lease_holder = to_user
        locked.lease_expires_at = now + sla.lease
        locked.save(
            update_fields=["status", "claimed_at", "lease_holder", "lease_expires_at", "updated_at"]
        )
        session = lock_session(locked)
        if locked.status == HandoffStatus.TAKEN_OVER:
            set_taken_over(session, holder=Actor.for_user(to_user).label, actor=actor)
        record_step(
            locked,
            "reassigned",
            actor=actor,
            detail={"previous_holder": previous, "holder": holder_label(locked)},
            event=HandoffReassigned(**event_fields(locked, actor), previous_holder=previous),
        )
    return _refresh(handoff, locked)


# --- Answers -----------------------------------------------------------------------------


def _answer(
    handoff: Handoff,
    *,
    user: "User",
    answer_type: str,
    answer: dict[str, Any],
    message: str | None = None,
    budget: tuple[int | None, Decimal | None] | None = None,
) -> Handoff:
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        if locked.status != HandoffStatus.CLAIMED:
            raise HandoffNotActive(
                f"The handoff is {locked.status}; it takes no answer now.",
                detail={"status": locked.status},
            )
        check_answer_allowed(locked.kind, locked.payload, answer_type)
        session = lock_session(locked)
        now = timezone.now()
        locked.answer = {"type": answer_type, **answer, "by": actor.label, "at": now.isoformat()}
        locked.answered_by = user
        locked.answered_at = now
        locked.status = HandoffStatus.ANSWERED
        locked.save(update_fields=["answer", "answered_by", "answered_at", "status", "updated_at"])
        if message is not None:
            # A text answer is part of the conversation: a message with role `human`.
            append_events(
                session,
                [
                    EventDraft(
                        kind=EventKind.MESSAGE,
                        role="human",
                        content={"text": message, "handoff_id": str(locked.pk)},
                    )
                ],
                actor=actor,
            )
        if budget is not None:
            set_budget(session, max_tokens=budget[0], max_cost=budget[1], actor=actor)
        record_step(
            locked,
            "answered",
            actor=actor,
            detail={"answer": locked.answer},
            event=HandoffAnswered(**event_fields(locked, actor), answer=locked.answer),
        )
    return _refresh(handoff, locked)


def _check_text(text: str, field: str = "text") -> None:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{field} must be a non-empty string.", detail={"field": field})
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"{field} holds at most {MAX_TEXT} characters.", detail={"field": field})
    check_storable(text, field=field)


def respond(handoff: Handoff, *, user: "User", text: str, choice: str | None = None) -> Handoff:
    """A text answer (a question's, or an approval's when its config allows_respond); also
    appended to the log as a message with role `human`. `choice` must be one of the
    question's choices."""
    _check_text(text)
    answer: dict[str, Any] = {"text": text}
    if choice is not None:
        choices = handoff.payload.get("choices") if handoff.kind == HandoffKind.QUESTION else None
        if not choices or choice not in choices:
            raise InvalidInput(
                "choice must be one of the question's choices.",
                detail={"field": "choice", "allowed": choices or []},
            )
        answer["choice"] = choice
    return _answer(handoff, user=user, answer_type="respond", answer=answer, message=text)


def accept(handoff: Handoff, *, user: "User") -> Handoff:
    """Approve the proposed action as it is (config.allow_accept)."""
    request = handoff.payload.get("action_request", {})
    return _answer(
        handoff,
        user=user,
        answer_type="accept",
        answer={"action": request.get("action"), "args": request.get("args")},
    )


def reject(handoff: Handoff, *, user: "User", reason: str = "") -> Handoff:
    """Refuse the proposed action, saying why (config.allow_ignore: the agent accepts that the
    action may not be taken). A verdict: the handoff is answered, and its holder still hands
    the session back (or takes it over). To dismiss the request without one: ignore."""
    _check_reason(reason)
    return _answer(handoff, user=user, answer_type="reject", answer={"reason": reason})


def ignore(handoff: Handoff, *, user: "User") -> Handoff:
    """Dismiss the request (Agent Inbox's "ignore", config.allow_ignore): no verdict and no
    words; the handoff ends at once as `ignored` (answer `{"type": "ignore", "args": None}`),
    the session resumes, and the agent, whose long-poll returns it, goes on without the action.
    Only the holder of a claimed handoff (NotLeaseHolder / HandoffNotActive, 409);
    AnswerNotAllowed (422, naming the allowed answers) unless the request allows ignoring."""
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        if locked.status != HandoffStatus.CLAIMED:
            raise HandoffNotActive(
                f"The handoff is {locked.status}; it can no longer be ignored.",
                detail={"status": locked.status},
            )
        check_answer_allowed(locked.kind, locked.payload, "ignore")
        session = lock_session(locked)
        now = timezone.now()
        locked.answer = {"type": "ignore", "args": None, "by": actor.label, "at": now.isoformat()}
        locked.answered_by = user
        locked.answered_at = now
        locked.save(update_fields=["answer", "answered_by", "answered_at", "updated_at"])
        _end_and_resume(locked, session, HandoffStatus.IGNORED, actor=actor, why="handoff ignored")
        record_step(
            locked,
            "ignored",
            actor=actor,
            detail={"answer": locked.answer},
            event=HandoffIgnored(**event_fields(locked, actor), answer=locked.answer),
        )
    return _refresh(handoff, locked)


def edit_and_accept(handoff: Handoff, *, user: "User", args: dict[str, Any]) -> Handoff:
    """Approve the action with edited arguments (config.allow_edit). When the request carries
    an args_schema, `args` must satisfy it (InvalidInput, 422, naming the first argument that
    does not), whoever sends them."""
    if not isinstance(args, dict):
        raise InvalidInput("args must be a JSON object.", detail={"field": "args"})
    check_storable(args, field="args")
    schema = schema_of(handoff.payload)
    if schema is not None:
        check_args(schema, args)
    request = handoff.payload.get("action_request", {})
    return _answer(
        handoff,
        user=user,
        answer_type="edit",
        answer={
            "action": request.get("action"),
            "args": args,
            "original_args": request.get("args"),
        },
    )


def approve_budget(
    handoff: Handoff, *, user: "User", max_tokens: int | None, max_cost: Decimal | None
) -> Handoff:
    """Answer a budget handoff with a new limit (None: no limit of that kind); the session's
    budget changes in the same transaction. (To stop instead: close_handoff.)"""
    if max_tokens is not None and max_tokens < 0 or max_cost is not None and max_cost < 0:
        raise InvalidInput("A budget cannot be negative.", detail={"field": "budget"})
    return _answer(
        handoff,
        user=user,
        answer_type="budget",
        answer={
            "budget": {
                "max_tokens": max_tokens,
                "max_cost": None if max_cost is None else str(max_cost),
            }
        },
        budget=(max_tokens, max_cost),
    )


# --- Working on the session --------------------------------------------------------------


def _work(
    handoff: Handoff,
    *,
    user: "User",
    drafts: list[EventDraft],
    what: str,
    taken_over_only: bool = False,
) -> Handoff:
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        if taken_over_only and locked.status != HandoffStatus.TAKEN_OVER:
            raise HandoffNotActive(
                "Take the session over before writing in it.", detail={"status": locked.status}
            )
        session = lock_session(locked)
        result = append_events(session, drafts, actor=actor)
        # The log holds the change itself (state / fact / message events); the audit says
        # who made it at which handoff.
        record_audit(
            locked.project_id,
            actor=actor,
            action=f"handoff.{what}",
            target_type="handoff",
            target_id=locked.pk,
            detail={
                "session_id": str(locked.session_id),
                "seqs": [event.seq for event in result.events],
            },
        )
        publish(HandoffWorked(**event_fields(locked, actor), what=what))
    return _refresh(handoff, locked)


def patch_state(handoff: Handoff, *, user: "User", patch: dict[str, Any]) -> Handoff:
    """The holder changes the working state: a `state` event (JSON Merge Patch)."""
    if not isinstance(patch, dict) or not patch:
        raise InvalidInput("patch must be a non-empty JSON object.", detail={"field": "patch"})
    return _work(
        handoff, user=user, drafts=[EventDraft(kind=EventKind.STATE, content=patch)], what="state"
    )


def add_facts(handoff: Handoff, *, user: "User", facts: dict[str, Any]) -> Handoff:
    """The holder records facts: one `fact` event per key."""
    if not isinstance(facts, dict) or not facts:
        raise InvalidInput("facts must be a non-empty JSON object.", detail={"field": "facts"})
    drafts = [
        EventDraft(kind=EventKind.FACT, content={"key": key, "value": value})
        for key, value in facts.items()
    ]
    return _work(handoff, user=user, drafts=drafts, what="facts")


def send_human_message(handoff: Handoff, *, user: "User", text: str) -> Handoff:
    """During a take-over the holder writes in the conversation: a message with role `human`."""
    _check_text(text)
    draft = EventDraft(
        kind=EventKind.MESSAGE,
        role="human",
        content={"text": text, "handoff_id": str(handoff.pk)},
    )
    return _work(handoff, user=user, drafts=[draft], what="message", taken_over_only=True)


# --- Ending ------------------------------------------------------------------------------


def take_over(handoff: Handoff, *, user: "User") -> Handoff:
    """The holder takes the conversation over: the agent's appends answer 409
    session_taken_over until the handoff is handed back (or closed, or released)."""
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        if locked.status not in (HandoffStatus.CLAIMED, HandoffStatus.ANSWERED):
            raise HandoffNotActive(
                f"The handoff is {locked.status}; it cannot be taken over.",
                detail={"status": locked.status},
            )
        session = lock_session(locked)
        set_taken_over(session, holder=actor.label, actor=actor)
        locked.status = HandoffStatus.TAKEN_OVER
        locked.save(update_fields=["status", "updated_at"])
        record_step(
            locked, "taken_over", actor=actor, event=HandoffTakenOver(**event_fields(locked, actor))
        )
    return _refresh(handoff, locked)


def hand_back_locked(locked: Handoff, *, actor: Actor, reason: str = "") -> None:
    """Hand a locked, leased handoff back: the take-over (if any) ends, the session resumes."""
    session = lock_session(locked)
    if session.taken_over_by:
        set_taken_over(session, holder="", actor=actor)
    _end_and_resume(
        locked,
        session,
        HandoffStatus.HANDED_BACK,
        actor=actor,
        why="handoff handed back",
        reason=reason,
    )
    record_step(
        locked,
        "handed_back",
        actor=actor,
        detail={"reason": reason, "answer": locked.answer},
        event=HandoffHandedBack(**event_fields(locked, actor), answer=locked.answer),
    )


def hand_back(handoff: Handoff, *, user: "User", reason: str = "") -> Handoff:
    """The holder gives the session back to the agent (resumed), answered or not."""
    _check_reason(reason)
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        hand_back_locked(locked, actor=actor, reason=reason)
    return _refresh(handoff, locked)


def close_handoff(handoff: Handoff, *, user: "User", reason: str = "") -> Handoff:
    """The holder ends it all: the handoff closes and so does the session."""
    _check_reason(reason)
    actor = Actor.for_user(user)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        require_holder(locked, user)
        session = lock_session(locked)
        if session.taken_over_by:
            set_taken_over(session, holder="", actor=actor)
        _resolve(locked, HandoffStatus.CLOSED)
        if session.can_transition(SessionStatus.CLOSED):
            _move_session(
                session,
                SessionStatus.CLOSED,
                locked,
                actor=actor,
                why="closed at handoff",
                reason=reason,
            )
        record_step(
            locked,
            "closed",
            actor=actor,
            detail={"reason": reason},
            event=HandoffClosed(**event_fields(locked, actor)),
        )
    return _refresh(handoff, locked)


def cancel_handoff(handoff: Handoff, *, actor: Actor, reason: str = "") -> Handoff:
    """The agent withdraws its request while nobody has answered (open or claimed); the
    session resumes. HandoffNotActive (409) once it is answered or over."""
    _check_reason(reason)
    with transaction.atomic():
        locked = lock_handoff(handoff.pk)
        if locked.status not in (HandoffStatus.OPEN, HandoffStatus.CLAIMED):
            raise HandoffNotActive(
                f"The handoff is {locked.status}; it can no longer be cancelled.",
                detail={"status": locked.status},
            )
        session = lock_session(locked)
        _end_and_resume(
            locked, session, HandoffStatus.CANCELLED, actor=actor, why="handoff cancelled"
        )
        record_step(
            locked,
            "cancelled",
            actor=actor,
            detail={"reason": reason},
            event=HandoffCancelled(**event_fields(locked, actor)),
        )
    return _refresh(handoff, locked)


__all__ = [
    "Priority",
    "RequestResult",
    "accept",
    "add_facts",
    "approve_budget",
    "cancel_handoff",
    "claim_handoff",
    "close_handoff",
    "edit_and_accept",
    "hand_back",
    "ignore",
    "patch_state",
    "reassign_handoff",
    "reject",
    "release_handoff",
    "renew_lease",
    "request_handoff",
    "respond",
    "send_human_message",
    "take_over",
]
