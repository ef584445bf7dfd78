"""Test data through the domain services themselves (as the product creates it)."""

import io
import itertools
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from core.actors import Actor
from core.models import ApiKey, KeyScope, Project, Role
from core.services.projects import add_member, create_api_key, create_project
from retention_app.models import ErasureRequest
from sessions_app.models import Artifact, Session
from sessions_app.services.artifacts import save_artifact
from sessions_app.services.sessions import open_session
from tasks_app.models import Task
from tasks_app.services.tasks import create_task

_counter = itertools.count(1)


def make_project(name: str | None = None) -> Project:
    return create_project(name or f"project-{next(_counter)}")


def make_user(username: str | None = None, password: str = "pw-for-tests-1") -> AbstractBaseUser:
    User = get_user_model()
    return User.objects.create_user(username=username or f"user{next(_counter)}", password=password)


def make_member(project: Project, role: str = Role.VIEWER, username: str | None = None):
    user = make_user(username)
    add_member(project, user, role)
    return user


def make_api_key(
    project: Project, name: str = "test-key", scope: str = KeyScope.AGENT
) -> tuple[ApiKey, str]:
    return create_api_key(project, name=name, scope=scope, actor=Actor.system("tests"))


def make_session(project: Project, agent: str = "test-agent", **overrides: Any) -> Session:
    session, _ = open_session(project, agent_name=agent, actor=Actor.system("tests"), **overrides)
    return session


def make_artifact(
    session: Session, name: str, data: bytes = b"x", content_type: str = "text/plain"
) -> Artifact:
    """A version saved through the service, as PUT /sessions/{id}/artifacts/{name} does."""
    return save_artifact(
        session,
        name,
        io.BytesIO(data),
        length=len(data),
        content_type=content_type,
        actor=Actor.system("tests"),
    )


def make_erasure(project: Project) -> ErasureRequest:
    """An erasure that names nobody: a receipt to read; running it again changes nothing."""
    return ErasureRequest.objects.create(
        project=project, selectors={"external_id": "nobody"}, requested_by="tests"
    )


def make_task(project: Project, workflow: str = "document_approval", **overrides: Any) -> Task:
    """A task started through the service, as an agent would."""
    return create_task(project, workflow=workflow, actor=Actor.system("tests"), **overrides).task
