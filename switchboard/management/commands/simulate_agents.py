"""Live agents for the demo: they talk to the public HTTP API (never the ORM), so a newcomer
watching the dashboard sees events stream in, tasks advance and sessions pause for a human.

One agent per agent framework whose adapter is installed (LangGraph, the OpenAI Agents SDK,
Google ADK: framework_agents, scripted, no model calls) starts a conversation now and then,
through the real adapter, and asks a person through the framework's own human in the loop;
answered in the queue, its run finishes with the answer.

Now and then an agent asks a person to approve a refund (`POST /sessions/{id}/handoffs`) and
waits for the answer by long-poll (`GET /handoffs/{id}?wait=30`, in a thread of its own, so
the other agents keep going): approved (as proposed or edited) it carries the action out with
the arguments it was given; rejected, closed or expired, it stops.
"""

import json
import random
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import Actor
from core.models import ApiKey, Project
from core.services.projects import create_api_key, revoke_api_key
from switchboard.management.framework_agents import LiveEpisodes

KEY_NAME = "simulate_agents"


class AgentApi:
    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url.rstrip("/") + "/api/v1"
        self.key = key

    def call(self, method: str, path: str, body: Any = None, *, timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            try:
                return json.loads(error.read() or b"null")
            except ValueError:  # not the API's JSON (a server stopping mid-request)
                return {"error": {"code": f"http_{error.code}"}}


class Command(BaseCommand):
    help = "Act as live agents against the HTTP API of a running server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--project", default="demo")
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds between steps.")
        parser.add_argument("--steps", type=int, default=0, help="Stop after N steps (0: never).")
        parser.add_argument("--wait-for-server", action="store_true")
        parser.add_argument("--seed", type=int, default=None)

    def handle(self, *args: object, **options: Any) -> None:
        project = Project.objects.filter(name=options["project"]).first()
        if project is None:
            raise CommandError(f"No project {options['project']!r}; run seed_demo first.")
        actor = Actor.system("simulate_agents")
        for old in ApiKey.objects.filter(project=project, name=KEY_NAME, revoked_at__isnull=True):
            revoke_api_key(old, actor=actor)
        _, raw_key = create_api_key(project, name=KEY_NAME, actor=actor)
        api = AgentApi(options["base_url"], raw_key)
        if options["wait_for_server"]:
            self._wait(options["base_url"])
        rng = random.Random(options["seed"])
        simulator = Simulator(api, rng, self.stdout.write)
        # One agent per agent framework whose adapter is installed (framework_agents).
        simulator.frameworks = LiveEpisodes(options["base_url"], raw_key, self.stdout.write)
        if not simulator.frameworks.frameworks:
            self.stdout.write(
                "No agent framework installed here (the client's extras): "
                "the framework agents are left out."
            )
        step = 0
        unreachable = False
        try:
            while options["steps"] == 0 or step < options["steps"]:
                try:
                    simulator.step()
                except OSError as error:  # urllib's URLError too
                    # The server stopped (scripts/run stops it first on Ctrl-C, then this
                    # process) or restarts: one line, no traceback, and try again.
                    if not unreachable:
                        self.stderr.write(f"The server does not answer ({error}); retrying.")
                    unreachable = True
                    time.sleep(max(options["interval"], 1.0))
                    continue
                unreachable = False
                step += 1
                time.sleep(options["interval"])
        except KeyboardInterrupt:
            pass

    def _wait(self, base_url: str) -> None:
        for _ in range(120):
            try:
                urllib.request.urlopen(base_url.rstrip("/") + "/api/v1/openapi.json", timeout=2)
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        raise CommandError(f"No server answered at {base_url}.")


class Simulator:
    """A few agents, each working one session at a time."""

    AGENTS = ["support-triage", "research-writer", "code-reviewer"]

    def __init__(self, api: AgentApi, rng: random.Random, log) -> None:  # type: ignore[no-untyped-def]
        self.api = api
        self.rng = rng
        self.log = log
        self.sessions: dict[str, dict[str, Any]] = {}

    # Agents of the agent frameworks (LangGraph, OpenAI Agents SDK, ADK), when installed.
    frameworks: LiveEpisodes | None = None

    def step(self) -> None:
        if self.frameworks is not None:
            # About one episode a minute at the default interval of a second.
            self.frameworks.step(0.02, self.rng.random())
        agent = self.rng.choice(self.AGENTS)
        current = self.sessions.get(agent)
        if current is None or current.get("status") in {"closed", "archived"}:
            opened = self.api.call(
                "POST",
                "/sessions",
                {
                    "agent": agent,
                    "title": f"Live run {time.strftime('%H:%M:%S')}",
                    "metadata": {"simulated": True},
                },
            )
            if "id" not in opened:
                self.log(f"open failed: {opened}")
                return
            self.sessions[agent] = current = {"id": opened["id"], "turn": 0, "status": "open"}
            self.log(f"{agent}: opened {opened['id']}")
            if agent == "research-writer":
                task = self.api.call(
                    "POST",
                    "/tasks",
                    {
                        "workflow": "research_report",
                        "session_ids": [opened["id"]],
                        "params": {"question": "How do agent frameworks store sessions?"},
                        # The dashboard's name for it (Task.display_title).
                        "metadata": {"title": "How agent frameworks store sessions"},
                    },
                )
                current["task_id"] = task.get("id")
        sid = current["id"]
        if current.get("handoff"):
            self.follow_handoff(agent, current)
            return
        current["turn"] += 1
        turn = current["turn"]
        if current["status"] == "paused":
            if self.rng.random() < 0.3:
                resumed = self.api.call(
                    "POST", f"/sessions/{sid}/resume", {"reason": "agent retries"}
                )
                current["status"] = resumed.get("status", current["status"])
            return
        events = [
            {"kind": "message", "role": "user", "content": {"text": f"Turn {turn}: what next?"}},
            {"kind": "tool_call", "content": {"name": "lookup", "arguments": {"turn": turn}}},
            {
                "kind": "message",
                "role": "assistant",
                "tokens": self.rng.randint(50, 400),
                "content": {"text": f"Working on it (turn {turn})."},
            },
            {"kind": "state", "content": {"turn": turn, "confidence": round(self.rng.random(), 2)}},
        ]
        if turn % 4 == 0:
            events.append({"kind": "fact", "content": {"key": "last_checkpoint", "value": turn}})
        self.api.call("POST", f"/sessions/{sid}/events", {"events": events})
        if current.get("task_id"):
            self.advance_task(current["task_id"], turn)
        roll = self.rng.random()
        if turn > 3 and roll < 0.12:
            self.ask_for_approval(agent, current, turn)
        elif turn > 6 and roll < 0.2:
            result = self.api.call(
                "POST", f"/sessions/{sid}/pause", {"reason": "Needs a human: unclear refund policy"}
            )
            current["status"] = result.get("status", current["status"])
        elif turn > 12 and roll > 0.9:
            result = self.api.call("POST", f"/sessions/{sid}/close", {"reason": "done"})
            current["status"] = result.get("status", "closed")

    # --- Asking a person, and waiting for the answer ------------------------------------------

    def ask_for_approval(self, agent: str, current: dict[str, Any], turn: int) -> None:
        amount = f"{self.rng.randint(501, 1500)}.00"
        asked = self.api.call(
            "POST",
            f"/sessions/{current['id']}/handoffs",
            {
                "kind": "approval",
                "reason": f"Refund ${amount}? Over the $500 I may approve alone.",
                "priority": self.rng.choice(["normal", "normal", "high"]),
                "idempotency_key": f"approval-{current['id']}-{turn}",
                "payload": {
                    "action_request": {
                        "action": "issue_refund",
                        "args": {"order": f"{4000 + turn}", "amount": amount, "currency": "USD"},
                    },
                    "config": {
                        "allow_accept": True,
                        "allow_edit": True,
                        "allow_respond": True,
                        "allow_ignore": True,
                    },
                    "description": "The customer's parcel arrived two weeks late.",
                },
            },
        )
        if "id" not in asked:
            self.log(f"{agent}: could not ask for approval: {asked}")
            return
        current["handoff"] = {"id": asked["id"], "outcome": None}
        current["status"] = "paused"
        self.log(f"{agent}: asked for approval of a ${amount} refund ({asked['id']}); waiting")
        waiter = threading.Thread(
            target=self._long_poll, args=(current["handoff"],), daemon=True, name=f"wait-{agent}"
        )
        waiter.start()

    def _long_poll(self, waiting: dict[str, Any]) -> None:
        """Long-poll until the handoff has an outcome (each poll holds no server thread)."""
        while True:
            try:
                body = self.api.call("GET", f"/handoffs/{waiting['id']}?wait=30", timeout=40)
            except OSError:
                time.sleep(2)
                continue
            if isinstance(body, dict) and body.get("status") not in (None, "open", "claimed"):
                waiting["outcome"] = body
                return

    def follow_handoff(self, agent: str, current: dict[str, Any]) -> None:
        outcome = current["handoff"]["outcome"]
        if outcome is None:
            return  # still waiting for a person
        current.pop("handoff")
        sid = current["id"]
        answer = outcome.get("answer") or {}
        kind = answer.get("type")
        if kind in ("accept", "edit"):
            args = answer.get("args") or {}
            edited = " (edited by a person)" if kind == "edit" else ""
            self.api.call(
                "POST",
                f"/sessions/{sid}/events",
                {
                    "events": [
                        {
                            "kind": "tool_call",
                            "content": {"name": answer.get("action"), "arguments": args},
                        },
                        {
                            "kind": "message",
                            "role": "assistant",
                            "content": {"text": f"Refund of ${args.get('amount')} issued{edited}."},
                        },
                    ]
                },
            )
            current["status"] = "open"
            self.log(f"{agent}: approved by {answer.get('by')}{edited}; refund issued")
            return
        if kind == "respond":
            self.api.call(
                "POST",
                f"/sessions/{sid}/events",
                {
                    "events": [
                        {
                            "kind": "message",
                            "role": "assistant",
                            "content": {"text": f"Noted: {answer.get('text')}"},
                        }
                    ]
                },
            )
            current["status"] = "open"
            self.log(f"{agent}: a person answered in words; continuing")
            return
        # Rejected, taken over, closed, cancelled or expired: this agent stops here.
        reason = {
            "reject": f"refund rejected by {answer.get('by')}",
        }.get(str(kind), f"handoff {outcome.get('status')}")
        if outcome.get("status") not in ("closed", "taken_over"):
            self.api.call("POST", f"/sessions/{sid}/close", {"reason": reason})
        current["status"] = "closed"
        self.log(f"{agent}: stopped ({reason})")

    # The research pipeline, one step of progress every couple of turns: a step runs, sometimes
    # fails once and is retried, then succeeds with structured outputs; the task moves on.
    PIPELINE = [
        ("research", "draft"),
        ("draft", "submit"),
        ("review", "approve"),
        ("publish", "publish"),
    ]

    def advance_task(self, task_id: str, turn: int) -> None:
        if turn % 2:
            return
        stage = (turn // 2 - 1) // 2
        if stage >= len(self.PIPELINE):
            return
        step, transition = self.PIPELINE[stage]
        path = f"/tasks/{task_id}/steps/{step}"
        if (turn // 2) % 2 == 1:
            self.api.call("PUT", path, {"status": "running", "agent": "research-writer"})
            if self.rng.random() < 0.3:
                self.api.call(
                    "PUT",
                    path,
                    {
                        "status": "failed",
                        "error": {
                            "type": "rate_limited",
                            "message": "search API answered 429",
                            "detail": {"retry_after": 2},
                        },
                    },
                )
            return
        self.api.call("PUT", path, {"status": "running", "agent": "research-writer"})
        outputs = {"turn": turn, "summary": f"{step} done", "items": self.rng.randint(1, 9)}
        self.api.call(
            "PUT",
            path,
            {
                "status": "succeeded",
                "outputs": outputs,
                "branch": transition if step == "review" else None,
            },
        )
        self.api.call("POST", f"/tasks/{task_id}/transitions", {"transition": transition})
