"""The agent API answers as its OpenAPI document says (schemathesis, in-process over WSGI).

Every operation in /api/v1/openapi.json gets the schema's examples and a bounded,
derandomized run of generated requests, positive and negative, authenticated with a real API
key of a project that has sessions (with events, a fork, a paused and a closed one), tasks
linked to them, and workflows. Every response must be no server error, have a documented
status and content type, and a body that conforms to the documented schema (the export's
JSON Lines line by line); a schema-valid request must get past request validation; and every
operation must have answered at least once with a success, so success bodies are checked, not
only 404s.

The database is `transactional_db`: requests commit for real (the append's one-statement path
runs only outside a transaction), and everything is flushed after the test.
"""

import json
import zlib
from collections import Counter
from decimal import Decimal

import jsonschema_rs
import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import settings
from schemathesis.core.parameters import ParameterLocation

from core.actors import Actor
from core.models import KeyScope
from core.services.webhooks import create_endpoint
from handoffs_app.services.handoffs import cancel_handoff, request_handoff
from retention_app.services.holds import place_hold
from sessions_app.services.blobs import store_blobs
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import close_session, pause_session
from sessions_app.services.sessions import fork_session
from tasks_app.services.steps import update_step
from tests.factories import (
    make_api_key,
    make_artifact,
    make_erasure,
    make_project,
    make_session,
    make_task,
)

TESTER = Actor.system("tests")
EXAMPLES_PER_OPERATION = 15

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())
# The schema's examples, then generated cases. Not the coverage phase (every boundary value of
# every parameter): it would add ~1,400 requests and ~40 s to the run.
schema.config.phases.update(phases=["examples", "fuzzing"])
# An operation without examples gets one case built from its schema, given real ids below.
schema.config.phases.examples.fill_missing = True
# Generation fed by earlier responses (their ids, their 4xx messages) would differ from run to
# run with the random UUIDs in them: the run stays reproducible without it.
for phase in (schema.config.phases.examples, schema.config.phases.fuzzing):
    phase.extra_data_sources.responses = False
schema.config.phases.fuzzing.error_feedback.is_enabled = False
schema.config.generation.update(
    # Unknown query parameters are refused (422 naming them, config.api), so schemathesis may
    # send them as "negative" data: the 422 must then be documented and in the error shape.
    # (Its negative_data_rejection never demands the refusal of an extra query parameter, as
    # most APIs ignore them: tests/api/test_unknown_query_parameters.py does.)
    allow_extra_parameters=True,
)
schema.config.checks.update(
    # positive_data_acceptance expects every schema-valid request to succeed, but a valid
    # request can still be refused for what only the database knows: an unknown workflow, a
    # state not in the task's workflow, a cursor this server never issued (422 with a domain
    # error code). valid_requests_parse below keeps the part of it that applies.
    excluded_check_names=["positive_data_acceptance"],
)

# What the current test's project holds: its API key, and real values for path parameters.
KNOWN: dict[str, list[str]] = {}
# (operation label, status) -> responses seen in the current test.
SEEN: Counter[tuple[str, int]] = Counter()


@schema.auth(refresh_interval=None)
class ProjectKey:
    """The project's API key, as `Authorization: Bearer <key>`."""

    def get(self, case, ctx):
        return KNOWN["api_key"][0]

    def set(self, case, data, ctx):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schemathesis.check
def valid_requests_parse(ctx, response, case):
    """A schema-valid (positive) request is never refused by request validation: no 400 (an
    unparsable body) and no 422 listing schema problems (ninja's validation errors, a list).
    Domain refusals (a 422 whose detail is an object: an unknown workflow, a bad cursor) pass.
    """
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return None
    status = response.status_code
    if status == 400 or (status == 422 and isinstance(response.json()["error"]["detail"], list)):
        raise AssertionError(f"A schema-valid request was refused ({status}): {response.text}")
    return None


@schemathesis.check
def jsonl_lines_conform(ctx, response, case):
    """Each line of a JSON Lines body conforms to the schema its media type documents.

    schemathesis has no deserializer for application/x-ndjson and would check nothing: the
    documented schema is that of one line, as the export's description says.
    """
    if not response.headers.get("content-type", [""])[0].startswith("application/x-ndjson"):
        return None
    responses = case.operation.definition.raw["responses"]
    line_schema = responses[str(response.status_code)]["content"]["application/x-ndjson"]
    validator = jsonschema_rs.validator_for(
        {**line_schema["schema"], "components": case.operation.schema.raw_schema["components"]},
        validate_formats=True,
    )
    for number, line in enumerate(response.content.decode().splitlines(), 1):
        errors = [error.message for error in validator.iter_errors(json.loads(line))]
        assert not errors, f"line {number} of the JSON Lines body: {errors}"
    return None


def use_real_ids(case) -> None:
    """Put the project's real ids where the schema can only make up random ones.

    The schema's examples get the first real value of each path parameter and real ids in
    their body's id lists, so they succeed; three in four of the other positive cases get
    real ids too (the rest keep made-up ones: 404s), chosen from the generated values so that
    a run stays reproducible.
    """
    if case.meta is None:
        return
    example = case.meta.phase.name == "examples"
    body = case.body if isinstance(case.body, dict | list | str) else None  # not NOT_SET's id
    digest = zlib.crc32(repr((case.path_parameters, body)).encode())
    if not example and digest % 4 == 0:
        return
    # New containers, never edits: Hypothesis may hand the generated ones out again.
    if isinstance(case.body, dict) and not case.meta.is_negative_at(ParameterLocation.BODY):
        case.body = {
            name: KNOWN[name.removesuffix("s")][: len(value)]
            if name in ("session_ids", "task_ids") and isinstance(value, list) and value
            else value
            for name, value in case.body.items()
        }
    if case.path_parameters and not case.meta.is_negative_at(ParameterLocation.PATH):
        known = dict(KNOWN)
        if case.operation.label.endswith("/cancel"):
            # Only an open handoff can be cancelled; reads get resolved ones only, so that a
            # generated `wait` answers at once instead of waiting up to a minute.
            known["handoff_id"] = KNOWN["open_handoff_id"]
        if case.operation.label.endswith("/handoffs"):
            # Earlier operations close and pause the other sessions: ask on an untouched one.
            known["session_id"] = KNOWN["asking_session_id"]
        label = case.operation.label
        if "/blobs" in label:
            known["session_id"] = KNOWN["blob_session_id"]
        if "/artifacts" in label:
            # Its own session, which no generated close reaches; names it holds.
            known["session_id"] = KNOWN["artifact_session_id"]
        if label.startswith("DELETE ") and label.endswith("/sessions/{session_id}"):
            # Deletes its own sessions (one with a fork), not those the others work on.
            known["session_id"] = KNOWN["doomed_session_id"]
        case.path_parameters = {
            name: known[name][0 if example else (digest >> 2) % len(known[name])]
            if name in known
            else value
            for name, value in case.path_parameters.items()
        }


def _build_world() -> None:
    project = make_project()
    # Admin-scoped: every operation, the admin-only ones included, must answer with a success
    # at least once (tests/api/test_key_scopes.py checks the scopes themselves).
    _, raw_key = make_api_key(project, scope=KeyScope.ADMIN)
    worked = make_session(project, title="worked", external_id="ext-1", metadata={"k": "v"})
    append_events(
        worked,
        [
            EventDraft(
                kind="message",
                role="user",
                content={"text": "hello"},
                tokens=3,
                cost=Decimal("0.000120"),
                idempotency_key="m-1",
            ),
            EventDraft(kind="state", content={"step": 1, "nested": {"a": [1, 2]}}),
            EventDraft(kind="fact", content={"key": "colour", "value": "blue"}),
            EventDraft(kind="decision", content={"decision": "go", "rationale": "tests"}),
            EventDraft(kind="tool_call", content={"name": "search", "arguments": {"q": "x"}}),
        ],
        actor=TESTER,
    )
    fork = fork_session(worked, at_seq=3, actor=TESTER, title="fork")
    append_events(fork, [EventDraft(kind="note", content={"n": 1})], actor=TESTER)
    paused = make_session(
        project, agent="other-agent", budget_max_tokens=1000, budget_max_cost=Decimal("2.5")
    )
    pause_session(paused, actor=TESTER, reason="tests")
    closed = make_session(project)
    close_session(closed, actor=TESTER, reason="tests")

    task = make_task(project, session_ids=[worked.pk, fork.pk], params={"doc": "d-1"})
    update_step(task, "draft", status="running", actor=TESTER)
    failed = make_task(project, external_id="task-ext-1")
    update_step(failed, "draft", status="running", actor=TESTER)
    update_step(
        failed,
        "draft",
        status="failed",
        actor=TESTER,
        error={"type": "boom", "message": "it broke", "detail": {}},
    )

    waiting = request_handoff(
        make_session(project), kind="question", payload={"question": "?"}, actor=TESTER
    ).handoff
    withdrawn = request_handoff(
        make_session(project), kind="takeover", payload={}, actor=TESTER
    ).handoff
    cancel_handoff(withdrawn, actor=TESTER)

    for held in (worked, fork, paused, closed):  # DELETE …/hold has holds to lift
        place_hold(project, session=held, reason="contract", actor=TESTER)
    doomed = [make_session(project, title=f"doomed {n}") for n in range(3)]
    append_events(doomed[0], [EventDraft(kind="note", content={})], actor=TESTER)
    fork_session(doomed[1], at_seq=0, actor=TESTER)  # refused (409) unless with_forks

    # DELETE /api-keys/{key_id} revokes spare keys, never the one the run uses (which would
    # answer 409 own_key anyway); DELETE /webhooks/{endpoint_id} has endpoints to delete.
    spare_keys = [make_api_key(project, name=f"spare {n}")[0] for n in range(3)]
    endpoints = [
        create_endpoint(
            project, url=f"https://hooks.example.com/{n}", events=["session.closed"], actor=TESTER
        )[0]
        for n in range(3)
    ]
    # Blobs go to a session of their own, which no generated close or pause reaches; it holds
    # the blob of the schema's examples (aGVsbG8=).
    blobs_session = make_session(project, title="blobs")
    (blob,) = store_blobs(blobs_session, [b"hello"])
    artifacts_session = make_session(project, title="artifacts")
    for name in ("document_approval", "approved"):
        for _ in range(3):  # versions enough that generated deletes leave some to read
            make_artifact(artifacts_session, name)
    KNOWN.update(
        api_key=[raw_key],
        key_id=[str(k.pk) for k in spare_keys],
        endpoint_id=[str(e.pk) for e in endpoints],
        handoff_id=[str(withdrawn.pk)],
        open_handoff_id=[str(waiting.pk)],
        asking_session_id=[str(make_session(project, title="asks for a person").pk)],
        doomed_session_id=[str(s.pk) for s in doomed],
        session_id=[str(s.pk) for s in (worked, fork, paused, closed)],
        task_id=[str(task.pk), str(failed.pk)],
        key=["draft", "review", "publish"],
        name=["document_approval", "approved"],
        blob_session_id=[str(blobs_session.pk)],
        artifact_session_id=[str(artifacts_session.pk)],
        sha256=[blob.sha256],
        erasure_id=[str(make_erasure(project).pk) for _ in range(2)],
    )


@pytest.fixture
def world(transactional_db):
    """The project, committed; afterwards, every operation must have answered a success."""
    _build_world()
    yield
    KNOWN.clear()
    seen = dict(SEEN)
    SEEN.clear()
    operations = {
        f"{method.upper()} {path}"
        for path, item in schema.raw_schema["paths"].items()
        for method in item
    }
    succeeded = {label for label, status in seen if 200 <= status < 300}
    print(f"{len(operations)} operations, {sum(seen.values())} requests:")  # -rP shows it
    for label in sorted(operations):
        statuses = sorted((status, n) for (op, status), n in seen.items() if op == label)
        print(f"  {label}: {', '.join(f'{n}x{status}' for status, n in statuses)}")
    assert operations - succeeded == set(), f"never a success: {sorted(operations - succeeded)}"


@pytest.fixture
def api_schema(world, request):
    # schemathesis 4.32's lazy schemas read and write `node._nodeid`, which pytest 9 renamed.
    request.node._nodeid = request.node.nodeid
    return schema


# One pytest test runs every operation (each a subtest): the project is built and the database
# flushed once, not once per operation.
lazy_schema = schemathesis.pytest.from_fixture("api_schema")


@lazy_schema.parametrize()
# The export streams an async iterator (for ASGI); this in-process WSGI client reads it whole.
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")
@settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None, database=None)
def test_it_answers_as_its_schema_says(case):
    use_real_ids(case)
    response = case.call_and_validate()
    SEEN[case.operation.label, response.status_code] += 1
