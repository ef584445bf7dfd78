"""The project's own API routes: what the key's project is (any key) and its settings
(admin-scoped keys only)."""

from django.http import HttpRequest, HttpResponse
from ninja import Field, Router

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey, KeyScope, Project
from core.schemas import InSchema, OutSchema, responses
from core.scopes import ApiKeyAuth
from core.services.projects import PROJECT_NAME_MAX, rename_project

router = Router(tags=["project"])


class ProjectOut(OutSchema):
    id: int
    name: str
    key_scope: str = Field(..., description="The scope of the key that made this request.")


class ProjectSettingsIn(InSchema):
    name: str = Field(..., min_length=1, max_length=PROJECT_NAME_MAX)


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _project_dict(project: Project, api_key: ApiKey) -> dict[str, object]:
    return {"id": project.pk, "name": project.name, "key_scope": api_key.scope}


@router.get("/project", summary="The key's project", response=responses({200: ProjectOut}))
def read_project(request: HttpRequest) -> HttpResponse:
    api_key = _key(request)
    return json_response(_project_dict(api_key.project, api_key))


@router.patch(
    "/project",
    summary="Change the project's settings (admin-scoped keys)",
    response=responses({200: ProjectOut}, 403, 409, body=True),
    auth=ApiKeyAuth(KeyScope.ADMIN),
)
def update_project(request: HttpRequest, payload: ProjectSettingsIn) -> HttpResponse:
    api_key = _key(request)
    project = rename_project(api_key.project, name=payload.name, actor=Actor.for_key(api_key))
    return json_response(_project_dict(project, api_key))
