"""Retention policies: the project's, agents' overrides, validation, saving (audited)."""

from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from core.actors import Actor
from core.errors import InvalidInput
from core.models import Project
from core.services.audit import record_audit
from sessions_app.models import Agent

from ..models import DURATION_FIELDS, OUTCOMES, POLICY_FIELDS, RetentionPolicy

# A duration beyond this is a typo, not a policy (and would overflow date arithmetic).
MAX_SECONDS = 100 * 365 * 24 * 3600
MAX_TAGS = 50
# Fields a PUT may leave out (then null), added after clients that name every other field.
OPTIONAL_FIELDS = ("artifact_max_age",)


@dataclass(frozen=True)
class Policy:
    """The rules in force for one group of sessions (None = never)."""

    close_idle_after: timedelta | None = None
    close_paused_after: timedelta | None = None
    archive_closed_after: timedelta | None = None
    compact_after: timedelta | None = None
    delete_after: timedelta | None = None
    outcome_compact_after: timedelta | None = None
    outcome_delete_after: timedelta | None = None
    # Artifact versions saved longer ago than this are deleted (None: kept with the session).
    artifact_max_age: timedelta | None = None
    keep_outcomes: tuple[str, ...] = field(default_factory=tuple)
    keep_tags: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in DURATION_FIELDS:
            value: timedelta | None = getattr(self, name)
            out[name] = None if value is None else int(value.total_seconds())
        out["keep_outcomes"] = list(self.keep_outcomes)
        out["keep_tags"] = list(self.keep_tags)
        return out


def default_policy() -> Policy:
    values: dict[str, int | None] = settings.SWITCHBOARD_RETENTION_DEFAULTS
    durations: dict[str, Any] = {}
    for name in DURATION_FIELDS:
        seconds = values.get(name)
        durations[name] = None if seconds is None else timedelta(seconds=seconds)
    return Policy(**durations)


def _row_values(row: RetentionPolicy, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(row, name)
        out[name] = tuple(value) if name in ("keep_outcomes", "keep_tags") else value
    return out


@dataclass
class ProjectPolicies:
    """A project's policy and its agents' effective policies (only agents with an override)."""

    project: Policy
    saved: bool  # False: the deployment's defaults (no row saved yet)
    overrides: dict[int, dict[str, Any]]  # agent id -> the fields it sets (as_dict units)
    agent_names: dict[int, str]
    effective: dict[int, Policy]  # agent id -> project policy with the override applied


def project_policies(project: Project | int) -> ProjectPolicies:
    project_id = project.pk if isinstance(project, Project) else project
    rows = list(RetentionPolicy.objects.filter(project_id=project_id).select_related("agent"))
    base_row = next((r for r in rows if r.agent_id is None), None)
    base = (
        Policy(**_row_values(base_row, POLICY_FIELDS)) if base_row is not None else default_policy()
    )
    overrides: dict[int, dict[str, Any]] = {}
    names: dict[int, str] = {}
    effective: dict[int, Policy] = {}
    for row in rows:
        if row.agent_id is None or row.agent is None:
            continue
        named = tuple(n for n in row.overrides if n in POLICY_FIELDS)
        policy = replace(base, **_row_values(row, named))
        effective[row.agent_id] = policy
        overrides[row.agent_id] = {n: policy.as_dict()[n] for n in named}
        names[row.agent_id] = row.agent.name
    return ProjectPolicies(base, base_row is not None, overrides, names, effective)


def policy_document(policies: ProjectPolicies) -> dict[str, Any]:
    """The policy as the API and the audit log show it."""
    return {
        **policies.project.as_dict(),
        "defaults": not policies.saved,
        "agents": {
            policies.agent_names[agent_id]: fields_set
            for agent_id, fields_set in sorted(
                policies.overrides.items(), key=lambda kv: policies.agent_names[kv[0]]
            )
        },
    }


# --- Validation ------------------------------------------------------------------------------


def _duration(name: str, value: Any, problems: dict[str, str]) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problems[name] = "a whole number of seconds, or null for never"
        return None
    if value <= 0:
        problems[name] = "must be positive (null means never)"
        return None
    if value > MAX_SECONDS:
        problems[name] = f"at most {MAX_SECONDS} seconds (100 years)"
        return None
    return timedelta(seconds=value)


def _parse_fields(data: dict[str, Any], problems: dict[str, str], prefix: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name in DURATION_FIELDS:
            values[name] = _duration(key, value, problems)
        elif name == "keep_outcomes":
            if not isinstance(value, list) or any(v not in OUTCOMES for v in value):
                problems[key] = f"a list of: {', '.join(OUTCOMES)}"
            else:
                values[name] = tuple(dict.fromkeys(value))
        elif name == "keep_tags":
            if (
                not isinstance(value, list)
                or len(value) > MAX_TAGS
                or any(not isinstance(v, str) or not v.strip() or len(v) > 100 for v in value)
            ):
                problems[key] = f"a list of at most {MAX_TAGS} tag names (1–100 characters)"
            else:
                values[name] = tuple(dict.fromkeys(v.strip() for v in value))
        else:
            problems[key] = "unknown field"
    return values


# The compaction delay as a person names it, in the messages about it.
_COMPACT_WORDS = {
    "compact_after": "the time before compaction",
    "outcome_compact_after": "the kept-longer time before compaction",
}


def _check_order(policy: Policy, problems: dict[str, str], prefix: str) -> None:
    """Deleting before compacting would make compaction pointless, and is almost surely a
    mistake: refused (both set, delete_after shorter than compact_after)."""
    pairs = (
        ("compact_after", "delete_after"),
        ("outcome_compact_after", "outcome_delete_after"),
    )
    for compact, delete in pairs:
        c, d = getattr(policy, compact), getattr(policy, delete)
        if c is not None and d is not None and d < c:
            problems[f"{prefix}{delete}"] = f"must not be shorter than {_COMPACT_WORDS[compact]}"


@dataclass
class ParsedPolicy:
    project: Policy
    overrides: dict[int, tuple[Agent, dict[str, Any]]]  # agent id -> (agent, fields set)


def parse_policy(project: Project, data: Any) -> ParsedPolicy:
    """Validate a whole policy document (the project's fields, `agents`: name -> fields).

    Raises InvalidInput (422) naming every problem; nothing is saved then.
    """
    if not isinstance(data, dict):
        raise InvalidInput("The policy must be a JSON object.")
    problems: dict[str, str] = {}
    body = {k: v for k, v in data.items() if k not in ("agents", "defaults")}
    values = _parse_fields(body, problems, "")
    missing = [n for n in POLICY_FIELDS if n not in body and n not in OPTIONAL_FIELDS]
    current = project_policies(project).project
    base = replace(current, **{**dict.fromkeys(OPTIONAL_FIELDS), **values})
    if missing and not problems:
        # A PUT names every field: a missing one is refused rather than guessed.
        problems.update(dict.fromkeys(missing, "required (null for never)"))
    _check_order(base, problems, "")
    agents_data = data.get("agents", {})
    overrides: dict[int, tuple[Agent, dict[str, Any]]] = {}
    if not isinstance(agents_data, dict):
        problems["agents"] = "an object: agent name -> the fields it overrides"
        agents_data = {}
    known = {a.name: a for a in Agent.objects.filter(project=project, name__in=list(agents_data))}
    for name, fields_data in agents_data.items():
        prefix = f"agents.{name}."
        agent = known.get(name)
        if agent is None:
            problems[f"agents.{name}"] = "no agent of that name in this project"
            continue
        if not isinstance(fields_data, dict):
            problems[f"agents.{name}"] = "an object of the fields this agent overrides"
            continue
        set_fields = _parse_fields(fields_data, problems, prefix)
        _check_order(replace(base, **set_fields), problems, prefix)
        overrides[agent.pk] = (agent, set_fields)
    if problems:
        raise InvalidInput("The retention policy is not valid; nothing was saved.", detail=problems)
    return ParsedPolicy(base, overrides)


def save_policy(project: Project, data: Any, *, actor: Actor) -> ProjectPolicies:
    """Replace the project's policy and its agent overrides; audited with old and new values."""
    parsed = parse_policy(project, data)
    with transaction.atomic():
        # The project row lock orders concurrent saves (the audit's old values stay true).
        Project.objects.select_for_update(no_key=True).filter(pk=project.pk).first()
        old = policy_document(project_policies(project))
        values = {f.name: getattr(parsed.project, f.name) for f in fields(Policy)}
        values["keep_outcomes"] = list(values["keep_outcomes"])
        values["keep_tags"] = list(values["keep_tags"])
        RetentionPolicy.objects.update_or_create(
            project=project,
            agent=None,
            defaults={**values, "overrides": [], "updated_by": actor.label},
        )
        RetentionPolicy.objects.filter(project=project, agent__isnull=False).exclude(
            agent_id__in=list(parsed.overrides)
        ).delete()
        for agent, set_fields in parsed.overrides.values():
            row_values: dict[str, Any] = {
                k: (list(v) if isinstance(v, tuple) else v) for k, v in set_fields.items()
            }
            RetentionPolicy.objects.update_or_create(
                project=project,
                agent=agent,
                defaults={
                    **dict.fromkeys(DURATION_FIELDS),
                    "keep_outcomes": [],
                    "keep_tags": [],
                    **row_values,
                    "overrides": sorted(set_fields),
                    "updated_by": actor.label,
                },
            )
        saved = project_policies(project)
        _audit_change(project, actor, old, saved)
    return saved


def reset_policy(project: Project, *, actor: Actor) -> ProjectPolicies:
    """Back to the deployment's defaults (SWITCHBOARD_RETENTION_DEFAULTS): the project's policy
    and every agent override are removed. Audited as a policy change (old and new values, and
    `reset`); resetting a project that has the defaults already changes and records nothing."""
    with transaction.atomic():
        Project.objects.select_for_update(no_key=True).filter(pk=project.pk).first()
        old = policy_document(project_policies(project))
        removed, _ = RetentionPolicy.objects.filter(project=project).delete()
        saved = project_policies(project)
        if removed:
            _audit_change(project, actor, old, saved, reset=True)
    return saved


def _audit_change(
    project: Project, actor: Actor, old: dict[str, Any], saved: ProjectPolicies, **extra: Any
) -> None:
    record_audit(
        project,
        actor=actor,
        action="retention.policy",
        target_type="project",
        target_id=project.pk,
        detail={"old": old, "new": policy_document(saved), **extra},
    )


def policies_from(parsed: ParsedPolicy) -> ProjectPolicies:
    """The unsaved policy `parsed` as the selection code takes it (for a preview of an edit)."""
    effective = {
        agent_id: replace(parsed.project, **set_fields)
        for agent_id, (_, set_fields) in parsed.overrides.items()
    }
    overrides = {
        agent_id: {n: effective[agent_id].as_dict()[n] for n in set_fields}
        for agent_id, (_, set_fields) in parsed.overrides.items()
    }
    names = {agent_id: agent.name for agent_id, (agent, _) in parsed.overrides.items()}
    return ProjectPolicies(parsed.project, True, overrides, names, effective)
