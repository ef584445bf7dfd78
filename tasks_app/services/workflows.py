"""Registering workflow definitions (from code, files or the API) and finding the one to run.

Definitions are immutable per (name, version). The built-in examples (project None) are
registered lazily from code on first use, so a fresh database needs no seeding step; a project's
own definitions are visible to that project only.
"""

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Q, QuerySet

from core.actors import Actor
from core.models import Project
from core.services.audit import record_audit

from ..errors import UnknownWorkflow, WorkflowVersionExists
from ..models import WorkflowDefinition
from ..workflows import BUILTIN_WORKFLOWS, WorkflowSpec, parse_workflow


def _same_or_conflict(existing: WorkflowDefinition, spec: WorkflowSpec) -> WorkflowDefinition:
    if existing.content_hash != spec.content_hash:
        raise WorkflowVersionExists(
            f"{spec.name} version {spec.version} is already registered with a different "
            "definition; register it as a new version.",
            detail={
                "name": spec.name,
                "version": spec.version,
                "latest_version": _latest_version(existing.project_id, spec.name),
            },
        )
    return existing


def _latest_version(project_id: int | None, name: str) -> int:
    visible = (
        Q(project__isnull=True)
        if project_id is None
        else (Q(project_id=project_id) | Q(project__isnull=True))
    )
    return (
        WorkflowDefinition.objects.filter(visible, name=name).aggregate(v=Max("version"))["v"] or 0
    )


def register_workflow(
    spec: WorkflowSpec,
    *,
    project: Project | None,
    actor: Actor,
    source: str = WorkflowDefinition.Source.API,
) -> tuple[WorkflowDefinition, bool]:
    """Store `spec` for `project` (None: built-in). Returns (definition, created).

    Registering the same content again is a no-op (created=False). A (name, version) already
    taken, by the project or a built-in, with different content raises WorkflowVersionExists.
    """
    if project is not None:
        # A project shares the version namespace of the built-ins: make sure they are there.
        ensure_builtin_workflows()
    visible = (
        Q(project__isnull=True)
        if project is None
        else (Q(project=project) | Q(project__isnull=True))
    )
    existing = WorkflowDefinition.objects.filter(
        visible, name=spec.name, version=spec.version
    ).first()
    if existing is not None:
        return _same_or_conflict(existing, spec), False
    try:
        with transaction.atomic():
            definition = WorkflowDefinition.objects.create(
                project=project,
                name=spec.name,
                version=spec.version,
                title=spec.title,
                definition=spec.as_dict(),
                content_hash=spec.content_hash,
                source=source,
                created_by=actor.label,
            )
            if project is not None:
                record_audit(
                    project,
                    actor=actor,
                    action="workflow.register",
                    target_type="workflow",
                    target_id=definition.pk,
                    detail={"name": spec.name, "version": spec.version, "source": source},
                )
    except IntegrityError:
        # Registered concurrently: the unique constraint picked one row; compare with it.
        existing = WorkflowDefinition.objects.filter(
            visible, name=spec.name, version=spec.version
        ).first()
        if existing is None:
            raise
        return _same_or_conflict(existing, spec), False
    return definition, True


def register_workflow_data(
    project: Project, data: dict[str, Any], *, actor: Actor
) -> tuple[WorkflowDefinition, bool]:
    """Parse and register a definition sent through the API; no version → the next free one."""
    ensure_builtin_workflows()
    if data.get("version") is None and isinstance(data.get("name"), str):
        data = {**data, "version": _latest_version(project.pk, data["name"]) + 1}
    return register_workflow(parse_workflow(data), project=project, actor=actor)


def ensure_builtin_workflows() -> None:
    """Register the code-defined workflows missing from the database (one query if none is)."""
    present = set(
        WorkflowDefinition.objects.filter(
            project__isnull=True, name__in=list(BUILTIN_WORKFLOWS)
        ).values_list("name", "version")
    )
    for spec in BUILTIN_WORKFLOWS.values():
        if (spec.name, spec.version) not in present:
            register_workflow(
                spec,
                project=None,
                actor=Actor.system("code"),
                source=WorkflowDefinition.Source.CODE,
            )


def visible_workflows(project: Project | int) -> QuerySet[WorkflowDefinition]:
    """The project's own definitions plus the built-ins, by name then version."""
    ensure_builtin_workflows()
    return WorkflowDefinition.objects.filter(Q(project=project) | Q(project__isnull=True)).order_by(
        "name", "version", "project_id"
    )


def resolve_workflow(
    project: Project | int, name: str, version: int | None = None
) -> WorkflowDefinition:
    """The definition a new task of `name` runs: `version`, or the latest one.

    Raises UnknownWorkflow (422) naming the workflows the project can start.
    """
    candidates = visible_workflows(project).filter(name=name)
    if version is not None:
        candidates = candidates.filter(version=version)
    definition = candidates.order_by("-version").first()
    if definition is None:
        available = sorted(set(visible_workflows(project).values_list("name", flat=True)))
        wanted = name if version is None else f"{name} version {version}"
        raise UnknownWorkflow(
            f"There is no workflow {wanted}.",
            detail={"workflow": name, "version": version, "available": available},
        )
    return definition
