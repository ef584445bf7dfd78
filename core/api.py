"""The project's own API routes: what the key's project is (any key); its settings, API keys
and webhook endpoints (admin-scoped keys only), through the services the dashboard uses.

A new key's secret and a new endpoint's signing secret are in the creation's answer only
(`Cache-Control: no-store`); lists never show them.
"""

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Field, Path, Router
from pydantic import ConfigDict

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey, KeyScope, Project, WebhookEndpoint
from core.queries import project_api_keys
from core.schemas import MAX_BIGINT, InSchema, IsoDateTime, OutSchema, responses
from core.scopes import ApiKeyAuth
from core.services.projects import (
    KEY_NAME_MAX,
    PROJECT_NAME_MAX,
    api_key_in,
    create_api_key,
    rename_project,
    revoke_api_key,
)
from core.services.webhooks import create_endpoint, delete_endpoint, endpoint_in, project_endpoints
from core.webhooks import EVENTS

router = Router(tags=["project"])
ADMIN = ApiKeyAuth(KeyScope.ADMIN)

WebhookEvent = Literal[tuple(EVENTS)]  # type: ignore[valid-type]


class ProjectOut(OutSchema):
    id: int
    name: str
    key_scope: str = Field(..., description="The scope of the key that made this request.")


class ProjectSettingsIn(InSchema):
    name: str = Field(..., min_length=1, max_length=PROJECT_NAME_MAX)


class ApiKeyOut(OutSchema):
    """An API key as lists show it: never its secret, which is stored hashed."""

    id: int
    name: str
    prefix: str = Field(..., description="the key's visible start: sb_<prefix>_…")
    scope: KeyScope
    created_at: datetime
    created_by: str | None = Field(..., description="the person who made it (null: a key did)")
    last_used_at: datetime | None = Field(..., description="to the minute")
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool = Field(..., description="neither revoked nor expired")


class ApiKeysOut(OutSchema):
    api_keys: list[ApiKeyOut] = Field(..., description="active first, newest first")


class ApiKeyIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"name": "ingest worker", "scope": "agent"}]}
    )
    name: str = Field(..., min_length=1, max_length=KEY_NAME_MAX)
    scope: Literal["agent", "admin"] = Field("agent", description="agent, or admin")
    expires_at: IsoDateTime | None = Field(None, description="in the future; null: never")


class CreatedApiKeyOut(ApiKeyOut):
    key: str = Field(..., description="the secret: shown in this answer only, never again")


class WebhookOut(OutSchema):
    id: int
    url: str
    events: list[str]
    active: bool
    created_at: datetime


class WebhooksOut(OutSchema):
    webhooks: list[WebhookOut]


class WebhookIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://hooks.example.com/switchboard",
                    "events": ["handoff.answered", "session.closed"],
                }
            ]
        }
    )
    url: str = Field(..., min_length=1, max_length=2000, description="http(s), a public host")
    events: list[WebhookEvent] = Field(..., min_length=1)  # type: ignore[valid-type]


class CreatedWebhookOut(WebhookOut):
    secret: str = Field(
        ..., description="the signing secret (HMAC-SHA256): shown in this answer only"
    )


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_key(_key(request))


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"  # it holds a secret: no cache may keep it
    return response


def _project_dict(project: Project, api_key: ApiKey) -> dict[str, object]:
    return {"id": project.pk, "name": project.name, "key_scope": api_key.scope}


def _api_key_dict(api_key: ApiKey) -> dict[str, Any]:
    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {
        "id": api_key.pk,
        "name": api_key.name,
        "prefix": api_key.prefix,
        "scope": api_key.scope,
        "created_at": api_key.created_at.isoformat(),
        "created_by": api_key.created_by.get_username() if api_key.created_by else None,
        "last_used_at": iso(api_key.last_used_at),
        "expires_at": iso(api_key.expires_at),
        "revoked_at": iso(api_key.revoked_at),
        "active": api_key.is_active,
    }


def _webhook_dict(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {
        "id": endpoint.pk,
        "url": endpoint.url,
        "events": endpoint.events,
        "active": endpoint.active,
        "created_at": endpoint.created_at.isoformat(),
    }


@router.get("/project", summary="The key's project", response=responses({200: ProjectOut}))
def read_project(request: HttpRequest) -> HttpResponse:
    api_key = _key(request)
    return json_response(_project_dict(api_key.project, api_key))


@router.patch(
    "/project",
    summary="Change the project's settings (admin-scoped keys)",
    response=responses({200: ProjectOut}, 403, 409, body=True),
    auth=ADMIN,
)
def update_project(request: HttpRequest, payload: ProjectSettingsIn) -> HttpResponse:
    api_key = _key(request)
    project = rename_project(api_key.project, name=payload.name, actor=Actor.for_key(api_key))
    return json_response(_project_dict(project, api_key))


# --- API keys ---------------------------------------------------------------------------------


@router.get(
    "/api-keys",
    summary="The project's API keys (never their secrets)",
    tags=["api-keys"],
    response=responses({200: ApiKeysOut}, 403),
    auth=ADMIN,
)
def list_api_keys(request: HttpRequest) -> HttpResponse:
    keys = project_api_keys(_key(request).project)
    return json_response({"api_keys": [_api_key_dict(k) for k in keys]})


@router.post(
    "/api-keys",
    summary="Create an API key (its secret is in this answer only)",
    description="The secret (`key`) is stored hashed and never shown again; the audit log "
    "records the creation.",
    tags=["api-keys"],
    response=responses({201: CreatedApiKeyOut}, 403, body=True),
    auth=ADMIN,
)
def create_key(request: HttpRequest, payload: ApiKeyIn) -> HttpResponse:
    api_key, raw_key = create_api_key(
        _key(request).project,
        name=payload.name,
        scope=payload.scope,
        expires_at=payload.expires_at,
        actor=_actor(request),
    )
    return _no_store(json_response({**_api_key_dict(api_key), "key": raw_key}, status=201))


@router.delete(
    "/api-keys/{key_id}",
    summary="Revoke an API key",
    description="Requests with it answer 401 from then on, on every server. Revoking a "
    "revoked key changes nothing. A key cannot revoke itself: 409 `own_key` (revoke it with "
    "another admin key, or on the dashboard).",
    tags=["api-keys"],
    response=responses({200: ApiKeyOut}, 403, 404, 409),
    auth=ADMIN,
)
def revoke_key(request: HttpRequest, key_id: int = Path(..., ge=1, le=MAX_BIGINT)) -> HttpResponse:
    api_key = api_key_in(_key(request).project_id, key_id)
    return json_response(_api_key_dict(revoke_api_key(api_key, actor=_actor(request))))


# --- Webhook endpoints ------------------------------------------------------------------------


@router.get(
    "/webhooks",
    summary="The project's webhook endpoints (never their secrets)",
    tags=["webhooks"],
    response=responses({200: WebhooksOut}, 403),
    auth=ADMIN,
)
def list_webhooks(request: HttpRequest) -> HttpResponse:
    endpoints = project_endpoints(_key(request).project)
    return json_response({"webhooks": [_webhook_dict(e) for e in endpoints]})


@router.post(
    "/webhooks",
    summary="Add a webhook endpoint (its signing secret is in this answer only)",
    description="The URL is checked as on the dashboard: http or https, no credentials in it, "
    "not this machine or a private, loopback or reserved address (422 naming `url`). Each "
    "delivery is signed with the secret (HMAC-SHA256).",
    tags=["webhooks"],
    response=responses({201: CreatedWebhookOut}, 403, body=True),
    auth=ADMIN,
)
def create_webhook(request: HttpRequest, payload: WebhookIn) -> HttpResponse:
    endpoint, secret = create_endpoint(
        _key(request).project, url=payload.url, events=list(payload.events), actor=_actor(request)
    )
    return _no_store(json_response({**_webhook_dict(endpoint), "secret": secret}, status=201))


@router.delete(
    "/webhooks/{endpoint_id}",
    summary="Delete a webhook endpoint, with its deliveries",
    tags=["webhooks"],
    response=responses({200: WebhookOut}, 403, 404),
    auth=ADMIN,
)
def delete_webhook(
    request: HttpRequest, endpoint_id: int = Path(..., ge=1, le=MAX_BIGINT)
) -> HttpResponse:
    endpoint = endpoint_in(_key(request).project, endpoint_id)
    body = _webhook_dict(endpoint)
    delete_endpoint(endpoint, actor=_actor(request))
    return json_response(body)
