"""A real ADK Runner, no network: an LlmAgent on a scripted model (a function call, then text)
and a tool that writes session, user:, app: and temp: state, run the same two turns once on
ADK's InMemorySessionService and once on SwitchboardSessionService. What each store holds
afterwards (events and state, read back by get_session and list_sessions) is the same."""

import asyncio
import itertools
import json
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.adk import SwitchboardSessionService

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)


class ScriptedLlm(BaseLlm):
    """Answers each model call with the next scripted response; asks nothing of a network."""

    script: list[types.Content]
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        content = self.script[self.calls]
        self.calls += 1
        yield LlmResponse(
            content=content,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=10, candidates_token_count=5, total_token_count=15
            ),
        )


def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """The weather in a city."""
    tool_context.state["user:city"] = city
    tool_context.state["app:lookups"] = tool_context.state.get("app:lookups", 0) + 1
    tool_context.state["temp:scratch"] = "never stored"
    tool_context.state["last_error"] = None
    return {"city": city, "sky": "sunny", "celsius": 21}


def model_turn(*parts: types.Part) -> types.Content:
    return types.Content(role="model", parts=list(parts))


def agent() -> LlmAgent:
    return LlmAgent(
        name="weather_agent",
        model=ScriptedLlm(
            model="scripted",
            script=[
                model_turn(
                    types.Part.from_function_call(name="get_weather", args={"city": "Paris"})
                ),
                model_turn(types.Part(text="It is sunny in Paris, 21 °C.")),
                model_turn(types.Part(text="You asked about Paris.")),
            ],
        ),
        instruction="Answer about the weather.",
        tools=[get_weather],
        output_key="answer",
    )


async def run_two_turns(service) -> tuple[Any, Any, Any]:
    runner = Runner(agent=agent(), app_name="weather", session_service=service)
    session = await service.create_session(
        app_name="weather", user_id="ada", session_id="chat-1", state={"lang": "en"}
    )
    for text in ("What is the weather in Paris?", "Which city did I ask about?"):
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="ada", session_id=session.id, new_message=message):
            pass
    stored = await service.get_session(app_name="weather", user_id="ada", session_id="chat-1")
    listed = await service.list_sessions(app_name="weather", user_id="ada")
    user_state = await service.get_user_state(app_name="weather", user_id="ada")
    return stored, listed, user_state


def comparable(events) -> list[dict[str, Any]]:
    """The events as JSON, without what differs between two runs by design: event ids,
    invocation ids, timestamps and the ids ADK makes for function calls (the same calls in the
    same places get the same stand-in)."""
    stand_ins: dict[str, str] = {}
    counter = itertools.count()

    def same(value: str) -> str:
        if value not in stand_ins:
            stand_ins[value] = f"id-{next(counter)}"
        return stand_ins[value]

    dumped = []
    for event in events:
        data = event.model_dump(mode="json", exclude_none=True)
        for name in ("id", "invocation_id", "timestamp"):
            data.pop(name, None)
        for part in data.get("content", {}).get("parts", []):
            for kind in ("function_call", "function_response"):
                if "id" in part.get(kind, {}):
                    part[kind]["id"] = same(part[kind]["id"])
        if "long_running_tool_ids" in data:
            data["long_running_tool_ids"] = sorted(map(same, data["long_running_tool_ids"]))
        dumped.append(json.loads(json.dumps(data, sort_keys=True)))
    return dumped


def test_a_runner_stores_on_switchboard_what_it_stores_in_memory(server_url, api_key):
    async def main():
        expected, expected_list, expected_user = await run_two_turns(InMemorySessionService())
        async with AsyncClient(server_url, api_key, retry=FAST) as client:
            service = SwitchboardSessionService(client, namespace="runner:")
            stored, listed, user_state = await run_two_turns(service)
            kinds = [
                (e.kind, e.role)
                async for e in client.iter_events(
                    (await client.find_session("runner:adk:s:weather:ada:chat-1")).id,
                    kind=["message", "tool_call", "tool_result"],
                )
            ]
        return expected, expected_list, expected_user, stored, listed, user_state, kinds

    expected, expected_list, expected_user, stored, listed, user_state, kinds = asyncio.run(main())
    assert len(stored.events) == len(expected.events) == 6
    assert comparable(stored.events) == comparable(expected.events)
    assert stored.state == expected.state
    assert stored.state == {
        "lang": "en",
        "last_error": None,
        "answer": "You asked about Paris.",
        "user:city": "Paris",
        "app:lookups": 1,
    }
    assert [s.state for s in listed.sessions] == [s.state for s in expected_list.sessions]
    assert user_state == expected_user == {"city": "Paris"}
    # What an operator reads on the session page: the conversation, the tool call and result.
    assert kinds == [
        ("message", "user"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
