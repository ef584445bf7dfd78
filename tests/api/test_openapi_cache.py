"""/api/v1/openapi.json is built once per process, not on every request (it takes ~1.5 s)."""

import json
import time

from ninja import NinjaAPI
from ninja.responses import NinjaJSONEncoder

from config.api import api


def timed_get(client, path):
    started = time.perf_counter()
    response = client.get(path)
    return response, time.perf_counter() - started


def test_the_schema_is_built_once_and_served_identical_and_fast(client, db):
    api.__dict__.pop("_openapi_schemas", None)  # as in a freshly started process

    first, first_seconds = timed_get(client, "/api/v1/openapi.json")
    second, second_seconds = timed_get(client, "/api/v1/openapi.json")

    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    # What ninja would build afresh, with nothing cached.
    fresh = NinjaAPI.get_openapi_schema(api, path_prefix="/api/v1/")
    assert first.json() == json.loads(json.dumps(fresh, cls=NinjaJSONEncoder))
    assert second_seconds < first_seconds / 4, (first_seconds, second_seconds)
    assert second_seconds < 0.5
