"""Every operation of the agent API declares its contract: a schema for each success status
and the one error shape for each error status. A new endpoint without one fails here."""

import json

import jsonschema_rs
import pytest

from config.api import api
from core.http import error_response
from core.schemas import BODY_ERROR_STATUSES, COMMON_ERROR_STATUSES

ERROR_REF = "#/components/schemas/ErrorOut"
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def _openapi() -> dict:
    return api.get_openapi_schema()


def _operations() -> list[tuple[str, str, dict]]:
    return [
        (method.upper(), path, operation)
        for path, item in _openapi()["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


OPERATIONS = _operations()


def test_it_lists_every_route_of_the_api_in_the_schema():
    routed = [
        (method, operation)
        for _, router in api._routers
        for view in router.path_operations.values()
        for operation in view.operations
        for method in operation.methods
    ]
    hidden = [op.view_func.__qualname__ for _, op in routed if not op.include_in_schema]
    assert not hidden, f"operations left out of the schema: {hidden}"
    assert len(OPERATIONS) == len(routed) >= 20


@pytest.mark.parametrize(
    ("method", "path", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_it_declares_a_body_schema_for_each_success_status(method, path, operation):
    responses = operation["responses"]
    success = {int(status): body for status, body in responses.items() if int(status) < 400}
    assert success, f"{method} {path} declares no success status"
    for status, body in success.items():
        assert 200 <= status < 300, f"{method} {path} declares {status}"
        content = body.get("content")
        assert content, f"{method} {path} {status}: no body schema"
        for media_type, media in content.items():
            schema = media.get("schema")
            assert schema, f"{method} {path} {status} {media_type}: no schema"
            # A oneOf (the export: a header line, then events) says something in each branch.
            # Raw bytes (a blob) are a binary string: all there is to say of them.
            for branch in schema.get("oneOf") or [schema]:
                said = branch.get("properties") or branch.get("items") or "$ref" in branch
                assert said or branch == {"type": "string", "format": "binary"}, (
                    f"{method} {path} {status} {media_type}: the schema says nothing: {schema}"
                )


@pytest.mark.parametrize(
    ("method", "path", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_it_declares_the_error_shape_for_each_error_status(method, path, operation):
    responses = operation["responses"]
    errors = {int(status): body for status, body in responses.items() if int(status) >= 400}
    assert set(COMMON_ERROR_STATUSES) <= set(errors), f"{method} {path}: {sorted(errors)}"
    if "requestBody" in operation:
        assert set(BODY_ERROR_STATUSES) <= set(errors), f"{method} {path}: {sorted(errors)}"
    if "{" in path:
        assert 404 in errors, f"{method} {path} looks something up but declares no 404"
    for status, body in errors.items():
        assert body["content"] == {"application/json": {"schema": {"$ref": ERROR_REF}}}, (
            f"{method} {path} {status}: {body}"
        )


def test_it_describes_what_error_response_sends():
    components = _openapi()["components"]
    validator = jsonschema_rs.validator_for({"$ref": ERROR_REF, "components": components})
    for detail in (None, {"limit": 5}, [{"type": "missing", "loc": ["body"], "msg": "x"}]):
        body = json.loads(error_response(409, "conflict", "No.", detail).content)
        assert validator.is_valid(body), body
    assert not validator.is_valid({"error": {"code": "x", "message": "y"}})
    assert not validator.is_valid({"error": {"code": "x", "message": "y", "detail": {}}, "z": 1})
