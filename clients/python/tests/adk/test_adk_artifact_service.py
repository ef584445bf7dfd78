"""SwitchboardArtifactService against a live server: every method of ADK's BaseArtifactService,
versions from 0 (again from 0 after a deletion), user: names shared across a user's sessions,
namespaces apart, nothing found as None / [], the same answers as ADK's InMemoryArtifactService
for the same calls, and a Runner whose tool saves and loads an artifact."""

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.artifacts import InMemoryArtifactService
from google.adk.errors import StaleSessionError
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.adk import SwitchboardSessionService
from switchboard_client.adk_artifacts import (
    SwitchboardArtifactService,
    original_name,
    stored_name,
)

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def run(url, key, scenario, namespace="art:"):
    async def main():
        async with AsyncClient(url, key, retry=FAST) as client:
            return await scenario(SwitchboardArtifactService(client, namespace=namespace), client)

    return asyncio.run(main())


def blob(data: bytes, mime_type: str = "image/png") -> types.Part:
    return types.Part(inline_data=types.Blob(mime_type=mime_type, data=data))


def test_versions_count_from_zero_and_load_the_latest_or_the_one_asked(server_url, api_key):
    async def scenario(service, client):
        ids = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        assert await service.save_artifact(**ids, filename="chart.png", artifact=blob(PNG)) == 0
        assert await service.save_artifact(**ids, filename="chart.png", artifact=blob(b"v1")) == 1
        assert (
            await service.save_artifact(
                **ids, filename="notes.txt", artifact=types.Part(text="héllo")
            )
            == 0
        )
        assert await service.load_artifact(**ids, filename="chart.png") == blob(b"v1")
        assert await service.load_artifact(**ids, filename="chart.png", version=0) == blob(PNG)
        assert await service.load_artifact(**ids, filename="chart.png", version=2) is None
        assert await service.load_artifact(**ids, filename="notes.txt") == types.Part(text="héllo")
        assert await service.list_versions(**ids, filename="chart.png") == [0, 1]
        assert await service.list_artifact_keys(**ids) == ["chart.png", "notes.txt"]
        described = await service.list_artifact_versions(**ids, filename="chart.png")
        assert [(v.version, v.mime_type) for v in described] == [(0, "image/png"), (1, "image/png")]
        latest = await service.get_artifact_version(**ids, filename="chart.png")
        assert latest is not None and latest.version == 1
        assert latest.canonical_uri.endswith("/artifacts/chart.png?version=2")
        first = await service.get_artifact_version(**ids, filename="chart.png", version=0)
        assert first is not None and first.canonical_uri.endswith("?version=1")
        assert await service.get_artifact_version(**ids, filename="chart.png", version=5) is None
        # They are artifacts of the session SwitchboardSessionService keeps the ADK session in:
        # the save opened it, and the session service finds it.
        stored = await client.find_session("art:adk:s:app:u:s1")
        listed = {
            a.name: [v.version for v in a.versions] for a in await client.list_artifacts(stored.id)
        }
        assert listed == {"chart.png": [1, 2], "notes.txt": [1]}
        assert await client.get_artifact(stored.id, "chart.png", version=1) == PNG
        sessions = SwitchboardSessionService(client, namespace="art:")
        assert await sessions.get_session(app_name="app", user_id="u", session_id="s1")

    run(server_url, api_key, scenario)


def test_delete_removes_every_version_and_numbering_starts_again(server_url, api_key):
    async def scenario(service, client):
        ids = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        await service.save_artifact(**ids, filename="a.bin", artifact=blob(b"1", "x/y"))
        await service.save_artifact(**ids, filename="a.bin", artifact=blob(b"2", "x/y"))
        await service.delete_artifact(**ids, filename="a.bin")
        assert await service.load_artifact(**ids, filename="a.bin") is None
        assert await service.list_versions(**ids, filename="a.bin") == []
        assert await service.list_artifact_versions(**ids, filename="a.bin") == []
        assert await service.list_artifact_keys(**ids) == []
        # As ADK's stores: the next save is version 0 again (Switchboard's own number is 3).
        assert await service.save_artifact(**ids, filename="a.bin", artifact=blob(b"3", "x/y")) == 0
        assert await service.load_artifact(**ids, filename="a.bin", version=0) == blob(b"3", "x/y")
        # A session id with spaces around names the session the session service keeps it as
        # (ADK's newer stores do the same; google-adk 2.13's in-memory one does not).
        assert await service.load_artifact(
            app_name="app", user_id="u", session_id=" s1\n", filename="a.bin"
        ) == blob(b"3", "x/y")
        # Deleting what is not there is no error.
        await service.delete_artifact(**ids, filename="never.bin")
        await service.delete_artifact(app_name="app", user_id="u", session_id="nope", filename="x")

    run(server_url, api_key, scenario)


def test_user_names_are_shared_by_the_users_sessions_only(server_url, api_key):
    async def scenario(service, client):
        s1 = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        s2 = {"app_name": "app", "user_id": "u", "session_id": "s2"}
        other = {"app_name": "app", "user_id": "v", "session_id": "s1"}
        await service.save_artifact(**s1, filename="own.txt", artifact=types.Part(text="s1"))
        assert (
            await service.save_artifact(
                **s1, filename="user:profile.txt", artifact=types.Part(text="p0")
            )
            == 0
        )
        assert (
            await service.save_artifact(
                **s2, filename="user:profile.txt", artifact=types.Part(text="p1")
            )
            == 1
        )
        # Without a session too, as ADK allows for user: names.
        assert await service.load_artifact(
            app_name="app", user_id="u", filename="user:profile.txt", version=0
        ) == types.Part(text="p0")
        assert await service.load_artifact(**s1, filename="user:profile.txt") == types.Part(
            text="p1"
        )
        assert await service.list_artifact_keys(**s1) == ["own.txt", "user:profile.txt"]
        assert await service.list_artifact_keys(**s2) == ["user:profile.txt"]
        assert await service.list_artifact_keys(app_name="app", user_id="u") == ["user:profile.txt"]
        assert await service.list_artifact_keys(**other) == []
        assert await service.load_artifact(**other, filename="user:profile.txt") is None
        # Kept in the session that holds the user's user: state, not in s1 or s2.
        holder = await client.find_session("art:adk:u:app:u")
        assert [a.name for a in await client.list_artifacts(holder.id)] == ["user:profile.txt"]
        await service.delete_artifact(**s2, filename="user:profile.txt")
        assert await service.list_artifact_keys(**s1) == ["own.txt"]
        # The user's session deleted by someone else after this service opened it: opened again.
        await client.delete_session(holder.id)
        assert await service.save_artifact(**s1, filename="user:x", artifact=blob(b"x")) == 0
        assert await service.list_artifact_keys(**s1) == ["own.txt", "user:x"]
        # A session-scoped name needs a session, as ADK's stores say.
        with pytest.raises(InputValidationError):
            await service.save_artifact(
                app_name="app", user_id="u", filename="own.txt", artifact=types.Part(text="x")
            )

    run(server_url, api_key, scenario)


def test_namespaces_keep_artifacts_apart(server_url, api_key):
    async def save(service, client):
        ids = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        await service.save_artifact(**ids, filename="f.txt", artifact=types.Part(text="mine"))
        await service.save_artifact(**ids, filename="user:g.txt", artifact=types.Part(text="g"))

    async def look(service, client):
        ids = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        return (
            await service.list_artifact_keys(**ids),
            await service.load_artifact(**ids, filename="f.txt"),
            await service.load_artifact(**ids, filename="user:g.txt"),
            await service.list_versions(**ids, filename="f.txt"),
        )

    run(server_url, api_key, save, namespace="one:")
    assert run(server_url, api_key, look, namespace="two:") == ([], None, None, [])
    assert run(server_url, api_key, look, namespace="one:") == (
        ["f.txt", "user:g.txt"],
        types.Part(text="mine"),
        types.Part(text="g"),
        [0],
    )


def test_any_file_name_round_trips_through_a_switchboard_name(server_url, api_key):
    names = [
        "reports/2026 Q1.pdf",
        "=41",
        "ünïcode ✓.txt",
        ".hidden",
        "a=b",
        "-x",
        "_=3D",
        "=",
        "_x",
    ]
    assert len({stored_name(n) for n in names}) == len(names)
    assert [original_name(stored_name(n)) for n in names] == names
    assert stored_name("user:report.pdf") == "user:report.pdf"

    async def scenario(service, client):
        ids = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        for number, name in enumerate(names):
            await service.save_artifact(**ids, filename=name, artifact=types.Part(text=str(number)))
        assert await service.list_artifact_keys(**ids) == sorted(names)
        for number, name in enumerate(names):
            assert await service.load_artifact(**ids, filename=name) == types.Part(text=str(number))
        with pytest.raises(InputValidationError):
            await service.save_artifact(**ids, filename="é" * 40, artifact=types.Part(text="x"))

    run(server_url, api_key, scenario)


async def calls(service) -> list[Any]:
    """One sequence of calls and what each answered, as comparable values."""
    ids = {"app_name": "cmp", "user_id": "u", "session_id": "s1"}
    answers: list[Any] = []
    answers.append(await service.load_artifact(**ids, filename="a.png"))
    answers.append(await service.list_artifact_keys(**ids))
    answers.append(await service.list_versions(**ids, filename="a.png"))
    answers.append(await service.get_artifact_version(**ids, filename="a.png"))
    answers.append(await service.save_artifact(**ids, filename="a.png", artifact=blob(PNG)))
    answers.append(await service.save_artifact(**ids, filename="a.png", artifact=blob(b"2")))
    answers.append(
        await service.save_artifact(**ids, filename="b.txt", artifact=types.Part(text="bee"))
    )
    answers.append(
        await service.save_artifact(
            **ids, filename="user:c.json", artifact=blob(b"{}", "application/json")
        )
    )
    answers.append(
        await service.save_artifact(
            app_name="cmp",
            user_id="u",
            session_id="s2",
            filename="d.txt",
            artifact={"text": "a dict, as external callers send"},
        )
    )
    answers.append(
        await service.save_artifact(
            **ids,
            filename="link",
            artifact=types.Part(
                file_data=types.FileData(file_uri="gs://bucket/x.pdf", mime_type="application/pdf")
            ),
        )
    )
    ref = "artifact://apps/cmp/users/u/sessions/s1/artifacts/a.png/versions/0"
    answers.append(
        await service.save_artifact(
            **ids, filename="ref", artifact=types.Part(file_data=types.FileData(file_uri=ref))
        )
    )
    answers.append(
        await service.save_artifact(
            **ids,
            filename="plain.txt",
            artifact=types.Part.from_bytes(data=b"x", mime_type="text/plain"),
        )
    )
    for name in ("a.png", "b.txt", "user:c.json", "link", "ref", "plain.txt", "missing"):
        answers.append(await service.load_artifact(**ids, filename=name))
        answers.append(await service.list_versions(**ids, filename=name))
    answers.append(await service.load_artifact(**ids, filename="a.png", version=0))
    answers.append(await service.load_artifact(**ids, filename="a.png", version=-1))
    answers.append(await service.list_artifact_keys(**ids))
    answers.append(await service.list_artifact_keys(app_name="cmp", user_id="u", session_id="s2"))
    answers.append(await service.list_artifact_keys(app_name="cmp", user_id="u"))
    answers.append(await service.list_artifact_keys(app_name="cmp", user_id="other"))
    described = await service.list_artifact_versions(**ids, filename="a.png")
    answers.append([(v.version, v.mime_type, v.custom_metadata) for v in described])
    for name in ("b.txt", "plain.txt", "link"):
        one = await service.get_artifact_version(**ids, filename=name, version=0)
        answers.append((one.version, one.mime_type))
    # A rewind's marker (an empty octet-stream blob) loads as nothing.
    answers.append(
        await service.save_artifact(
            **ids, filename="b.txt", artifact=blob(b"", "application/octet-stream")
        )
    )
    answers.append(await service.load_artifact(**ids, filename="b.txt"))
    answers.append(await service.load_artifact(**ids, filename="b.txt", version=0))
    await service.delete_artifact(**ids, filename="a.png")
    await service.delete_artifact(**ids, filename="user:c.json")
    answers.append(await service.list_artifact_keys(**ids))
    answers.append(await service.load_artifact(**ids, filename="ref"))
    answers.append(await service.save_artifact(**ids, filename="a.png", artifact=blob(b"new")))
    answers.append(await service.list_versions(**ids, filename="a.png"))
    return answers


def test_it_answers_as_adks_in_memory_store_for_the_same_calls(server_url, api_key):
    expected = asyncio.run(calls(InMemoryArtifactService()))

    async def scenario(service, client):
        return await calls(service)

    assert run(server_url, api_key, scenario, namespace="cmp:") == expected
    # What the sequence exercised, so a mistake on both sides is not agreement on nothing.
    assert expected[4:12] == [0, 1, 0, 0, 0, 0, 0, 0]
    assert expected[12] == blob(b"2")


# --- A Runner whose tool saves and loads an artifact ------------------------------------------


class ScriptedLlm(BaseLlm):
    """Answers each model call with the next scripted response; asks nothing of a network."""

    script: list[types.Content]
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        content = self.script[self.calls]
        self.calls += 1
        yield LlmResponse(content=content)


async def make_report(title: str, tool_context: ToolContext) -> dict[str, Any]:
    """Write a report and read it back."""
    first = await tool_context.save_artifact("report.txt", types.Part(text=f"# {title}"))
    second = await tool_context.save_artifact("report.txt", types.Part(text=f"# {title} (v2)"))
    await tool_context.save_artifact("user:last_title.txt", types.Part(text=title))
    loaded = await tool_context.load_artifact("report.txt", version=first)
    keys = await tool_context.list_artifacts()
    return {"versions": [first, second], "first": loaded.text if loaded else None, "keys": keys}


def test_a_runners_tool_saves_and_loads_artifacts_beside_its_session(server_url, api_key):
    async def main():
        async with AsyncClient(server_url, api_key, retry=FAST) as client:
            sessions = SwitchboardSessionService(client, namespace="run:")
            artifacts = SwitchboardArtifactService(client, namespace="run:")
            model = ScriptedLlm(
                model="scripted",
                script=[
                    types.Content(
                        role="model",
                        parts=[
                            types.Part.from_function_call(
                                name="make_report", args={"title": "Sales"}
                            )
                        ],
                    ),
                    types.Content(role="model", parts=[types.Part(text="Done.")]),
                ],
            )
            agent = LlmAgent(name="writer", model=model, tools=[make_report])
            runner = Runner(
                agent=agent,
                app_name="reports",
                session_service=sessions,
                artifact_service=artifacts,
            )
            await sessions.create_session(app_name="reports", user_id="ada", session_id="r1")
            message = types.Content(role="user", parts=[types.Part(text="Write the report")])
            async for _ in runner.run_async(user_id="ada", session_id="r1", new_message=message):
                pass
            stored = await sessions.get_session(app_name="reports", user_id="ada", session_id="r1")
            holder = await client.find_session("run:adk:s:reports:ada:r1")
            kinds = [e.kind async for e in client.iter_events(holder.id)]
            latest = await artifacts.load_artifact(
                app_name="reports", user_id="ada", session_id="r1", filename="report.txt"
            )
            return stored, kinds, latest

    stored, kinds, latest = asyncio.run(main())
    responses = [r for e in stored.events for r in e.get_function_responses()]
    assert [r.response for r in responses] == [
        {"versions": [0, 1], "first": "# Sales", "keys": ["report.txt", "user:last_title.txt"]}
    ]
    # The tool's event records what it saved; the run went on after the saves (the artifact
    # events between the session's appends did not make it stale) to the model's last answer.
    deltas = [e.actions.artifact_delta for e in stored.events if e.actions.artifact_delta]
    assert deltas == [{"report.txt": 1, "user:last_title.txt": 0}]
    assert stored.events[-1].content.parts[0].text == "Done."
    assert kinds.count("artifact") == 2
    assert latest == types.Part(text="# Sales (v2)")


def test_a_save_between_appends_leaves_the_session_fresh_another_write_does_not(
    server_url, api_key
):
    async def scenario(service, client):
        sessions = SwitchboardSessionService(client, namespace="art:")
        session = await sessions.create_session(app_name="app", user_id="u", session_id="s1")
        ids = {"app_name": "app", "user_id": "u", "session_id": "s1"}
        await service.save_artifact(**ids, filename="a.txt", artifact=types.Part(text="1"))
        await service.save_artifact(**ids, filename="a.txt", artifact=types.Part(text="2"))
        # Two artifact events since `session` was read: they are not ADK session events.
        await sessions.append_event(session, Event(invocation_id="i", author="user"))
        # Someone else's event (with an artifact after it) still makes the reader stale.
        other = await sessions.get_session(**ids)
        await sessions.append_event(other, Event(invocation_id="i", author="user"))
        await service.save_artifact(**ids, filename="a.txt", artifact=types.Part(text="3"))
        with pytest.raises(StaleSessionError):
            await sessions.append_event(session, Event(invocation_id="i", author="user"))
        got = await sessions.get_session(**ids)
        assert len(got.events) == 2

    run(server_url, api_key, scenario)


def test_a_reference_from_a_padded_session_id_stays_in_its_session(server_url, api_key):
    async def scenario(service, client):
        padded = {"app_name": "app", "user_id": "u", "session_id": "s1\n"}
        await service.save_artifact(**padded, filename="src.txt", artifact=types.Part(text="hi"))
        uri = "artifact://apps/app/users/u/sessions/s1/artifacts/src.txt/versions/0"
        ref = types.Part(file_data=types.FileData(file_uri=uri, mime_type="text/plain"))
        await service.save_artifact(**padded, filename="ref.txt", artifact=ref)
        assert await service.load_artifact(**padded, filename="ref.txt") == types.Part(text="hi")
        # Another session's file stays out of reach.
        other = {"app_name": "app", "user_id": "u", "session_id": "s2"}
        with pytest.raises(InputValidationError):
            await service.save_artifact(**other, filename="ref.txt", artifact=ref)

    run(server_url, api_key, scenario)


def save_in_turn(url: str, key: str, saves: int) -> list[int]:
    """A process's saves of one name (run_in_processes): the versions ADK was given."""

    async def main():
        async with AsyncClient(url, key, retry=FAST) as client:
            service = SwitchboardArtifactService(client, namespace="race:")
            ids = {"app_name": "app", "user_id": "u", "session_id": "s1", "filename": "log.txt"}
            return [
                await service.save_artifact(**ids, artifact=types.Part(text=str(n)))
                for n in range(saves)
            ]

    return asyncio.run(main())


def test_processes_saving_one_name_at_once_each_get_their_own_version(server_url, api_key):
    from tests.multiproc import run_in_processes

    # Made first, so the processes race on saves, not on opening the session.
    run(
        server_url,
        api_key,
        lambda service, client: service.save_artifact(
            app_name="app",
            user_id="u",
            session_id="s1",
            filename="log.txt",
            artifact=types.Part(text="first"),
        ),
        namespace="race:",
    )
    given = run_in_processes(save_in_turn, [(server_url, api_key, 4)] * 3)
    versions = sorted(v for per_process in given for v in per_process)
    # Each save's number is its place among the stored versions: never two alike, no gaps.
    assert versions == list(range(1, 13))
    for per_process in given:
        assert per_process == sorted(per_process)
