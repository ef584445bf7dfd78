"""Which sessions each retention rule applies to now: the one selection code the jobs and the
preview share (so the preview says what the job then does).

Knowledge of handoffs is read from the session's own log, not from handoffs_app (a sibling
floor): handoffs_app writes a durable `handoff` event at every step of a handoff, carrying the
handoff's status after the step. A session "had a handoff" if its log has such an event; a
paused session "has an open handoff" if its latest one carries an active status.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import (
    CharField,
    Exists,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Greatest, Least
from django.db.models.lookups import Exact

from core.models import Project
from sessions_app.models import Artifact, Event, EventKind, Session, SessionStatus, Tier
from sessions_app.services.artifacts import expirable_versions

from .models import HoldScope, LegalHold
from .services.policies import Policy, ProjectPolicies, project_policies

# handoffs_app.models.ACTIVE_STATUSES, as the handoff records in the log spell them (a test
# checks the two agree).
ACTIVE_HANDOFF_STATUSES = ("open", "claimed", "answered", "taken_over")

ACTIONS = ("close_idle", "close_paused", "archive", "compact", "delete", "expire_artifacts")
# The column each rule ages on: candidates come oldest first by it (then by id).
ORDER_FIELDS = {
    "close_idle": "updated_at",
    "close_paused": "updated_at",
    "archive": "closed_at",
    "compact": "closed_at",
    "delete": "archived_at",
    "expire_artifacts": "created_at",
}


def after_key(action: str, key: tuple[Any, Any]) -> Q:
    """Candidates past `key` ((order value, id) of the last one a batch took) in their order:
    the next batch of a run starts there instead of walking the ones already done again."""
    field, (value, pk) = ORDER_FIELDS[action], key
    # `>= value` first, implied by the rest: the bound PostgreSQL starts the index scan at.
    return Q(**{f"{field}__gte": value}) & (
        Q(**{f"{field}__gt": value}) | Q(**{field: value, "pk__gt": pk})
    )


def _latest_handoff_status() -> Subquery:
    return Subquery(
        Event.objects.filter(session_id=OuterRef("pk"), tier=Tier.DURABLE, kind=EventKind.HANDOFF)
        .annotate(_status=KeyTextTransform("status", "content"))
        .order_by("-seq")
        .values("_status")[:1],
        output_field=CharField(),
    )


def _had_handoff() -> Exists:
    return Exists(
        Event.objects.filter(session_id=OuterRef("pk"), tier=Tier.DURABLE, kind=EventKind.HANDOFF)
    )


def keep_longer(policy: Policy) -> Q | None:
    """Sessions the policy's outcome rules keep longer, or None if it has none."""
    parts: list[Q] = []
    if "error" in policy.keep_outcomes:
        last_kind = Subquery(
            Event.objects.filter(session_id=OuterRef("pk"))
            .exclude(kind__in=[EventKind.LIFECYCLE, EventKind.HANDOFF])
            .order_by("-seq")
            .values("kind")[:1]
        )
        # Coalesced: a session with no such event has no NULL here to poison the negation.
        parts.append(Q(Exact(Coalesce(last_kind, Value("")), Value(EventKind.ERROR))))
    if "handoff" in policy.keep_outcomes:
        parts.append(Q(_had_handoff()))
    if "over_budget" in policy.keep_outcomes:
        parts.append(
            Q(budget_max_tokens__isnull=False, tokens_used__gt=F("budget_max_tokens"))
            | Q(budget_max_cost__isnull=False, cost_used__gt=F("budget_max_cost"))
        )
    for tag in policy.keep_tags:
        # has_key first: a session without tags is then FALSE here, not NULL (a NULL would
        # drop it from the negation, "not kept longer", too).
        parts.append(Q(metadata__has_key="tags", metadata__tags__contains=[tag]))
    if not parts:
        return None
    combined = parts[0]
    for part in parts[1:]:
        combined |= part
    return combined


@dataclass
class Holds:
    project: bool
    agent_ids: set[int]

    def excluded(self) -> Q:
        """Sessions under a standing hold (their own, their agent's)."""
        session_hold = Exists(
            LegalHold.objects.filter(
                session_id=OuterRef("pk"), scope=HoldScope.SESSION, released_at__isnull=True
            )
        )
        q = Q(session_hold)
        if self.agent_ids:
            q |= Q(agent_id__in=self.agent_ids)
        return q


def standing_holds(project_id: int) -> Holds:
    rows = LegalHold.objects.filter(
        project_id=project_id,
        released_at__isnull=True,
        scope__in=[HoldScope.PROJECT, HoldScope.AGENT],
    ).values_list("scope", "agent_id")
    project_held = False
    agents: set[int] = set()
    for scope, agent_id in rows:
        if scope == HoldScope.PROJECT:
            project_held = True
        elif agent_id is not None:
            agents.add(agent_id)
    return Holds(project_held, agents)


def _groups(policies: ProjectPolicies) -> list[tuple[Policy, Q]]:
    """(policy, which sessions it governs): each agent with an override, then the rest."""
    groups = [(policy, Q(agent_id=agent_id)) for agent_id, policy in policies.effective.items()]
    rest = ~Q(agent_id__in=list(policies.effective)) if policies.effective else Q()
    groups.append((policies.project, rest))
    return groups


def _compact_boundary(deleted: QuerySet[Session] | None = None) -> Any:
    """Up to the head, but never past the lowest fork point of a fork of this session: a fork's
    visible history must keep its transient events (see services.compaction). Forks among
    `deleted` no longer count (candidates' `deleted`)."""
    forks = Session.objects.filter(parent_id=OuterRef("pk"))
    if deleted is not None:
        forks = forks.exclude(pk__in=deleted.values("pk"))
    lowest_fork = Subquery(
        forks.order_by().values("parent_id").annotate(low=Min("fork_seq")).values("low")[:1],
        output_field=IntegerField(),
    )
    return Least(F("head_seq"), Coalesce(lowest_fork, F("head_seq")))


def _aged(field: str, now: datetime, after: Any) -> Q:
    return Q(**{f"{field}__lt": now - after})


def candidates(
    project: Project | int,
    action: str,
    *,
    now: datetime,
    policies: ProjectPolicies | None = None,
    holds: Holds | None = None,
    deleted: QuerySet[Session] | None = None,
) -> QuerySet[Session]:
    """The sessions `action` applies to at `now`, by the project's policy (with overrides,
    outcome rules and legal holds). Ordered by the column the rule ages on, oldest first.

    `deleted` (compact, expire_artifacts): sessions to take as gone, for the preview of what
    follows a deletion run (the delete rule's candidates): none of them is compacted or has
    its artifacts expired, and a fork among them no longer bounds its parent's compaction nor
    keeps the versions it shared. The jobs never pass it: each selects from the rows as they
    are."""
    project_id = project.pk if isinstance(project, Project) else project
    policies = policies or project_policies(project_id)
    holds = holds or standing_holds(project_id)
    base = Session.objects.filter(project_id=project_id)
    rule = Q(pk__in=[])  # nothing
    for policy, governs in _groups(policies):
        part = (
            _expire_rule(policy, now, deleted)
            if action == "expire_artifacts"
            else _rule(action, policy, now)
        )
        if part is not None:
            rule |= governs & part
    qs = base.filter(rule)
    if action == "close_paused":
        qs = qs.annotate(
            _handoff_status=Coalesce(_latest_handoff_status(), Value(""), output_field=CharField())
        ).exclude(_handoff_status__in=ACTIVE_HANDOFF_STATUSES)
    if action in ("compact", "delete", "expire_artifacts"):
        if holds.project:
            # Empty, but with the annotations below (the preview sums over them).
            qs = qs.none()
        qs = qs.exclude(holds.excluded())
    if action == "compact":
        # Implied by the boundary filter below; said as the compaction index's condition
        # (sessions_app: session_retention_compact) so PostgreSQL can use it.
        qs = qs.filter(head_seq__gt=F("compacted_through_seq"))
        if deleted is not None:
            qs = qs.exclude(pk__in=deleted.values("pk"))
        qs = qs.annotate(
            _boundary=_compact_boundary(deleted),
            _after=Greatest(Coalesce(F("fork_seq"), Value(0)), F("compacted_through_seq")),
        ).filter(_boundary__gt=F("_after"))
    if action == "expire_artifacts" and deleted is not None:
        qs = qs.exclude(pk__in=deleted.values("pk"))
    if action == "delete":
        # A session with forks stays until they are gone (their history runs through it).
        qs = qs.exclude(Exists(Session.objects.filter(parent_id=OuterRef("pk"))))
    return qs.order_by(ORDER_FIELDS[action], "id")


def _expire_rule(policy: Policy, now: datetime, deleted: QuerySet[Session] | None) -> Q | None:
    """Sessions holding a version the policy's artifact_max_age expires (any status)."""
    if policy.artifact_max_age is None:
        return None
    versions = expirable_versions(now - policy.artifact_max_age, gone=deleted)
    return Q(Exists(versions.filter(session_id=OuterRef("pk"))))


def expiring_versions(
    sessions: QuerySet[Session],
    policies: ProjectPolicies,
    *,
    now: datetime,
    deleted: QuerySet[Session] | None = None,
) -> QuerySet[Artifact]:
    """The versions the expire_artifacts rule deletes from `sessions` (its candidates): each
    session's by the max age of its agent's policy (the preview's count)."""
    rule = Q(pk__in=[])
    for agent_id, policy in [*policies.effective.items(), (None, policies.project)]:
        if policy.artifact_max_age is None:
            continue
        if agent_id is None:
            others = list(policies.effective)
            governs = ~Q(session__agent_id__in=others) if others else Q()
        else:
            governs = Q(session__agent_id=agent_id)
        rule |= governs & Q(created_at__lt=now - policy.artifact_max_age)
    return expirable_versions(now, gone=deleted).filter(rule, session_id__in=sessions.values("pk"))


def _rule(action: str, policy: Policy, now: datetime) -> Q | None:
    if action == "close_idle":
        if policy.close_idle_after is None:
            return None
        statuses = [SessionStatus.OPEN, SessionStatus.RESUMED]
        return Q(status__in=statuses) & _aged("updated_at", now, policy.close_idle_after)
    if action == "close_paused":
        if policy.close_paused_after is None:
            return None
        return Q(status=SessionStatus.PAUSED) & _aged("updated_at", now, policy.close_paused_after)
    if action == "archive":
        if policy.archive_closed_after is None:
            return None
        return Q(status=SessionStatus.CLOSED) & _aged("closed_at", now, policy.archive_closed_after)
    if action == "compact":
        return _by_outcome(
            policy,
            Q(status__in=[SessionStatus.CLOSED, SessionStatus.ARCHIVED]),
            "closed_at",
            now,
            policy.compact_after,
            policy.outcome_compact_after,
        )
    if action == "delete":
        return _by_outcome(
            policy,
            Q(status=SessionStatus.ARCHIVED),
            "archived_at",
            now,
            policy.delete_after,
            policy.outcome_delete_after,
        )
    raise ValueError(action)


def _by_outcome(
    policy: Policy, status: Q, field: str, now: datetime, normal: Any, longer: Any
) -> Q | None:
    keep = keep_longer(policy)
    parts: list[Q] = []
    if keep is None:
        if normal is None:
            return None
        return status & _aged(field, now, normal)
    if normal is not None:
        parts.append(~keep & _aged(field, now, normal))
    if longer is not None:
        parts.append(keep & _aged(field, now, longer))
    if not parts:
        return None
    combined = parts[0] if len(parts) == 1 else parts[0] | parts[1]
    return status & combined
