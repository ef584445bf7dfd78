"""A project's digest of waiting handoffs: e-mailed and/or posted to a chat webhook
(Slack-compatible incoming webhook, `{"text": …}`) every interval, for people who do not watch
the queue's tab.

A digest goes to a channel only when something is waiting (an open handoff nobody has claimed)
and the waiting set differs from the one that channel was last sent (a fingerprint of the
handoffs' ids, overdue flags and priorities, kept on the settings row). A failed send is logged
and keeps the channel's old fingerprint, so the next interval tries again; it never raises into
the beat job.

Two workers never send the same digest: a batch takes due settings rows with
SELECT … FOR UPDATE SKIP LOCKED and moves each one's `digest_due_at` on to the next interval in
that short transaction; the sends happen after it commits, outside any lock.
"""

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from core.access import require_role
from core.actors import Actor
from core.errors import InvalidInput
from core.models import Project, Role
from core.services.audit import record_audit
from core.webhooks import USER_AGENT, TargetRefused, check_target

from ..models import Handoff, HandoffSettings, HandoffStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

# The intervals an admin chooses from (seconds → words); 0 is "no digest".
INTERVALS = {
    0: "No digest",
    15 * 60: "Every 15 minutes",
    60 * 60: "Hourly",
    24 * 60 * 60: "Daily",
}
MAX_EMAILS = 20
# Lines listed in one digest; the rest are counted, with a link to the queue.
MAX_LINES = 10
ERROR_LENGTH = 500


# --- Settings ---------------------------------------------------------------------------------


def clean_emails(raw: list[str]) -> list[str]:
    """Addresses trimmed, lower-cased domain kept as typed, repeats dropped; InvalidInput names
    the first one that is not an address."""
    emails: list[str] = []
    for address in (a.strip() for a in raw):
        if not address:
            continue
        try:
            validate_email(address)
        except ValidationError:
            raise InvalidInput(
                f"{address!r} is not an e-mail address.", detail={"field": "emails"}
            ) from None
        if address not in emails:
            emails.append(address)
    if len(emails) > MAX_EMAILS:
        raise InvalidInput(
            f"At most {MAX_EMAILS} addresses; a mailing list can reach more.",
            detail={"field": "emails"},
        )
    return emails


def clean_chat_url(url: str) -> str:
    """The chat webhook URL through the webhooks' own check (core.webhooks.check_target): the
    same refusals, in the same words (a loopback or private target only where
    SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS allows it)."""
    url = url.strip()
    if not url:
        return ""
    try:
        return check_target(
            url, allow_private=settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS
        ).url
    except TargetRefused as refused:
        raise InvalidInput(str(refused), detail={"field": "chat_url"}) from None


def update_digest_settings(
    project_id: int,
    *,
    user: "User",
    emails: list[str],
    chat_url: str,
    interval_seconds: int,
    now: datetime | None = None,
) -> HandoffSettings:
    """Set the project's digest; admins only (PermissionDenied below, 404 for non-members).
    InvalidInput (nothing saved) for an address, a chat URL check_target refuses, or an
    interval not in INTERVALS. A channel whose target changed forgets what it was sent (its new
    readers get the current state); a digest switched on or changed is due at once (the job's
    next run). Audited."""
    require_role(user, project_id, Role.ADMIN)
    if interval_seconds not in INTERVALS:
        raise InvalidInput("Choose one of the offered intervals.", detail={"field": "interval"})
    emails = clean_emails(emails)
    chat_url = clean_chat_url(chat_url)
    if interval_seconds and not (emails or chat_url):
        raise InvalidInput(
            "Give at least one e-mail address or a chat webhook URL, or choose no digest.",
            detail={"field": "emails"},
        )
    now = now or timezone.now()
    with transaction.atomic():
        # A project without a row has the model's defaults: creating it changes no SLA.
        row, _ = HandoffSettings.objects.select_for_update().get_or_create(project_id=project_id)
        before = _digest_view(row)
        if emails != row.digest_emails:
            row.digest_email_sent_state = ""
        if chat_url != row.digest_chat_url:
            row.digest_chat_sent_state = ""
        row.digest_emails = emails
        row.digest_chat_url = chat_url
        row.digest_interval_seconds = interval_seconds
        row.digest_due_at = now if interval_seconds else None
        row.save()
        after = _digest_view(row)
        if after != before:
            record_audit(
                project_id,
                actor=Actor.for_user(user),
                action="handoff.digest",
                target_type="project",
                target_id=project_id,
                detail={"before": before, "after": after},
            )
    return row


def _digest_view(row: HandoffSettings) -> dict[str, object]:
    return {
        "emails": list(row.digest_emails),
        "chat_url": row.digest_chat_url,
        "interval_seconds": row.digest_interval_seconds,
    }


# --- What a digest says -----------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingLine:
    handoff_id: str
    kind: str
    agent: str
    reason: str
    overdue: bool
    priority: str
    waiting_since: datetime
    url: str


@dataclass(frozen=True)
class Digest:
    project_name: str
    count: int
    overdue: int
    oldest: datetime
    lines: list[WaitingLine]
    queue_url: str
    state: str  # the fingerprint of the waiting set
    now: datetime = field(default_factory=timezone.now)

    @property
    def subject(self) -> str:
        noun = "handoff" if self.count == 1 else "handoffs"
        overdue = f", {self.overdue} overdue" if self.overdue else ""
        return f"[Switchboard] {self.count} {noun} waiting in {self.project_name}{overdue}"

    def _summary(self) -> list[str]:
        verb = "is" if self.count == 1 else "are"
        noun = "handoff" if self.count == 1 else "handoffs"
        overdue = f" ({self.overdue} overdue)" if self.overdue else ""
        return [
            f"{self.count} {noun} {verb} waiting for a person in {self.project_name}{overdue}.",
            f"The oldest has waited {_duration(self.now - self.oldest)}"
            f" (since {self.oldest:%Y-%m-%d %H:%M} UTC).",
        ]

    def _line(self, line: WaitingLine) -> str:
        flags = "OVERDUE · " if line.overdue else ""
        reason = f": {line.reason}" if line.reason else ""
        waited = _duration(self.now - line.waiting_since)
        return f"{flags}{line.kind} from {line.agent}{reason} (waiting {waited}, {line.priority})"

    def text(self) -> str:
        """The e-mail's plain-text body."""
        out = [*self._summary(), ""]
        for line in self.lines:
            out += [f"- {self._line(line)}", f"  {line.url}"]
        more = self.count - len(self.lines)
        if more > 0:
            out.append(f"… and {more} more.")
        out += ["", f"The queue: {self.queue_url}"]
        return "\n".join(out) + "\n"

    def chat_text(self) -> str:
        """The chat message: Slack's mrkdwn, with what people typed escaped (&, <, >) so an
        agent's reason cannot forge a link or a mention."""
        out = [_mrkdwn(" ".join(self._summary()))]
        for line in self.lines:
            out.append(f"• <{line.url}|{_mrkdwn(self._line(line))}>")
        more = self.count - len(self.lines)
        if more > 0:
            out.append(f"… and {more} more.")
        out.append(f"<{self.queue_url}|Open the queue>")
        return "\n".join(out)


def _mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _duration(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds() // 60))
    if minutes < 1:
        return "under a minute"
    if minutes < 120:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} hours"
    return f"{hours // 24} days"


def public_url(path: str) -> str:
    return settings.SWITCHBOARD_PUBLIC_URL.rstrip("/") + path


def waiting_digest(project: Project, *, now: datetime | None = None) -> Digest | None:
    """The project's waiting handoffs as a digest (None when nothing waits): the count, the
    overdue among them, the oldest, the first MAX_LINES in the queue's order (priority, then
    wait), each with its workspace link."""
    now = now or timezone.now()
    waiting = list(
        Handoff.objects.filter(project_id=project.pk, status=HandoffStatus.OPEN)
        .select_related("session__agent")
        .order_by("-priority", "created_at")
        .only(
            "id",
            "kind",
            "reason",
            "overdue",
            "priority",
            "created_at",
            "due_at",
            "session__agent__name",
        )
    )
    if not waiting:
        return None
    marks = sorted(f"{h.pk}:{int(h.overdue or h.due_at < now)}:{h.priority}" for h in waiting)
    state = hashlib.sha256("\n".join(marks).encode()).hexdigest()
    lines = [
        WaitingLine(
            handoff_id=str(h.pk),
            kind=h.get_kind_display().lower(),
            agent=h.session.agent.name,
            reason=h.reason[:200],
            overdue=h.overdue or h.due_at < now,
            priority=h.priority_name,
            waiting_since=h.created_at,
            url=public_url(reverse("dashboard:handoff_detail", args=[h.pk])),
        )
        for h in waiting[:MAX_LINES]
    ]
    return Digest(
        project_name=project.name,
        count=len(waiting),
        overdue=sum(1 for h in waiting if h.overdue or h.due_at < now),
        oldest=min(h.created_at for h in waiting),
        lines=lines,
        queue_url=public_url(reverse("dashboard:handoff_queue", args=[project.pk])),
        state=state,
        now=now,
    )


# --- Sending ----------------------------------------------------------------------------------


class SendFailed(Exception):
    """One channel's send failed; the message says why, in words for the settings page."""


def send_digest_email(emails: list[str], digest: Digest) -> None:
    try:
        send_mail(
            digest.subject,
            digest.text(),
            None,  # DEFAULT_FROM_EMAIL
            emails,
            fail_silently=False,
        )
    except Exception as error:  # noqa: BLE001 - any backend's failure is this channel's failure
        raise SendFailed(f"E-mail failed: {type(error).__name__}: {error}") from error


def post_digest_chat(url: str, digest: Digest) -> None:
    """POST {"text": …} to the chat webhook: checked again now (check_target, as each webhook
    delivery is: the name may resolve elsewhere than when it was saved), no redirects followed."""
    try:
        check_target(url, allow_private=settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS)
    except TargetRefused as refused:
        raise SendFailed(f"Chat webhook refused: {refused}") from None
    body = json.dumps({"text": digest.chat_text()}).encode()
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    try:
        with httpx.Client(follow_redirects=False) as client:
            response = client.post(
                url, content=body, headers=headers, timeout=settings.SWITCHBOARD_WEBHOOK_TIMEOUT
            )
    except httpx.HTTPError as error:
        raise SendFailed(f"Chat webhook failed: {type(error).__name__}") from error
    if not 200 <= response.status_code < 300:
        raise SendFailed(f"Chat webhook answered {response.status_code}.")


@dataclass
class DigestRun:
    """What one run of the digest job did."""

    looked_at: int = 0
    sent: int = 0  # channel sends that succeeded
    failed: int = 0


@dataclass(frozen=True)
class _Taken:
    settings_id: int
    emails: list[str]
    chat_url: str
    digest: Digest
    email_due: bool
    chat_due: bool


def _take_due(now: datetime, limit: int) -> tuple[list[_Taken], int]:
    """Due settings rows, locked SKIP LOCKED and moved on to their next interval in one short
    transaction; returns the digests to send (a channel only when its state changed)."""
    taken: list[_Taken] = []
    with transaction.atomic():
        rows = list(
            HandoffSettings.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("project")
            .filter(digest_interval_seconds__gt=0, digest_due_at__lte=now)
            .order_by("digest_due_at")[:limit]
        )
        for row in rows:
            HandoffSettings.objects.filter(pk=row.pk).update(
                digest_due_at=now + timedelta(seconds=row.digest_interval_seconds)
            )
            try:
                with transaction.atomic():  # a savepoint: one project's failure stays its own
                    digest = waiting_digest(row.project, now=now)
            except Exception:  # noqa: BLE001 - logged; the others' digests still go out
                logger.exception("handoff digest of project %s not composed", row.project_id)
                continue
            if digest is None:
                continue
            email_due = bool(row.digest_emails) and digest.state != row.digest_email_sent_state
            chat_due = bool(row.digest_chat_url) and digest.state != row.digest_chat_sent_state
            if email_due or chat_due:
                taken.append(
                    _Taken(
                        row.pk,
                        list(row.digest_emails),
                        row.digest_chat_url,
                        digest,
                        email_due,
                        chat_due,
                    )
                )
    return taken, len(rows)


def _send_one(taken: _Taken, run: DigestRun, now: datetime) -> None:
    errors: list[str] = []
    sent_states: dict[str, str] = {}
    channels: list[tuple[str, bool, Callable[[], None]]] = [
        (
            "digest_email_sent_state",
            taken.email_due,
            lambda: send_digest_email(taken.emails, taken.digest),
        ),
        (
            "digest_chat_sent_state",
            taken.chat_due,
            lambda: post_digest_chat(taken.chat_url, taken.digest),
        ),
    ]
    for state_field, due, send in channels:
        if not due:
            continue
        try:
            send()
        except SendFailed as failed:
            run.failed += 1
            errors.append(str(failed))
            logger.warning(
                "handoff digest of settings %s not sent (retried next interval): %s",
                taken.settings_id,
                failed,
            )
        else:
            run.sent += 1
            sent_states[state_field] = taken.digest.state
    update: dict[str, object] = {
        **sent_states,
        "digest_last_error": "; ".join(errors)[:ERROR_LENGTH],
    }
    if sent_states:
        update["digest_sent_at"] = now
    HandoffSettings.objects.filter(pk=taken.settings_id).update(**update)


def send_due_digests(*, now: datetime | None = None, limit: int = 20) -> DigestRun:
    """One batch of the digest job: take up to `limit` due projects (see the module's
    docstring), then send each one's digest outside any transaction. Never raises for a
    channel's failure (logged, recorded on the row, retried next interval)."""
    now = now or timezone.now()
    run = DigestRun()
    taken, run.looked_at = _take_due(now, limit)
    for one in taken:
        _send_one(one, run, now)
    return run
