"""Demo data for a newcomer: an admin, a project, agents, sessions in every lifecycle state.

Idempotent: a second run finds the demo project and leaves it as it is.
"""

import os
import random
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.models import Project, Role
from core.services.projects import add_member, create_api_key, create_project, revoke_api_key
from handoffs_app.models import ACTIVE_STATUSES, Handoff, HandoffKind
from handoffs_app.services.handoffs import claim_handoff, request_handoff
from handoffs_app.services.jobs import enforce_sla_batch
from sessions_app.models import SessionStatus
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import transition_session
from sessions_app.services.sessions import fork_session, open_session
from switchboard.management import framework_agents
from tasks_app.demo import build_demo_tasks, linked_task_script

DEMO_PROJECT = "demo"
DEMO_USERS = [
    ("admin", "switchboard-admin", Role.ADMIN),
    ("operator", "switchboard-operator", Role.OPERATOR),
    ("viewer", "switchboard-viewer", Role.VIEWER),
]


class Command(BaseCommand):
    help = "Create the demo project, users and data (does nothing if they exist)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--long-log", type=int, default=3000, help="Events in the longest demo session."
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Run even with DEBUG off (the demo users have known passwords).",
        )

    def handle(
        self, *args: object, seed: int, long_log: int, force: bool, **options: object
    ) -> None:
        if not settings.DEBUG and not force:
            raise CommandError(
                "seed_demo creates users with published passwords; with DEBUG off it needs --force."
            )
        project = Project.objects.filter(name=DEMO_PROJECT).first()
        created = project is None
        if created:
            with transaction.atomic():
                project = create_project(DEMO_PROJECT)
        self._ensure_users(project)
        if created:
            build_demo(project, random.Random(seed), long_log=long_log)
            build_demo_tasks(project)
            build_demo_handoffs(project, random.Random(seed))
            for line in build_framework_agents(project):
                self.stdout.write(line)
            self.stdout.write(self.style.SUCCESS(f"Demo project {DEMO_PROJECT!r} created."))
        else:
            self.stdout.write(f"Demo project {DEMO_PROJECT!r} already there; left as it is.")
        # Where scripts/run serves it: its HOST and PORT, with the same defaults.
        host = os.environ.get("HOST") or "127.0.0.1"
        port = os.environ.get("PORT") or "8000"
        self.stdout.write(f"Sign in at http://{host}:{port}/ with one of:")
        for username, password, role in DEMO_USERS:
            self.stdout.write(f"  {role:<9} username {username!r}  password {password!r}")

    def _ensure_users(self, project: Project) -> None:
        User = get_user_model()
        for username, password, role in DEMO_USERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User.objects.create_user(
                    username=username,
                    password=password,
                    is_staff=role == Role.ADMIN,
                    is_superuser=role == Role.ADMIN,
                )
            add_member(project, user, role)


def build_demo(project: Project, rng: random.Random, *, long_log: int) -> None:
    actor = Actor.system("seed_demo")
    # (agent, topic, status, events, why it paused: for the paused and the resumed one).
    plans = [
        ("support-triage", "refund for order #4411", SessionStatus.OPEN, 40, ""),
        ("research-writer", "quarterly market report", SessionStatus.OPEN, 12, ""),
        (
            "code-reviewer",
            "PR #982 review",
            SessionStatus.PAUSED,
            30,
            "Agent asked a human to confirm a breaking API change",
        ),
        (
            "billing-assistant",
            "invoice mismatch",
            SessionStatus.RESUMED,
            25,
            "Agent asked a human to approve a $120 credit note",
        ),
        ("support-triage", "password reset loop", SessionStatus.CLOSED, 60, ""),
        ("support-triage", "GDPR data export", SessionStatus.ARCHIVED, 20, ""),
        ("support-triage", "account migration to the EU region", SessionStatus.OPEN, long_log, ""),
    ]
    for index, (agent, topic, status, length, pause_reason) in enumerate(plans):
        session, _ = open_session(
            project,
            agent_name=agent,
            actor=actor,
            external_id=f"demo-{index}",
            # As written, first letter up: "PR #982 review" (str.capitalize: "Pr #982 review").
            title=topic[:1].upper() + topic[1:],
            metadata={"customer": f"cust-{100 + index}", "demo": True},
            budget_max_tokens=200_000 if index % 2 else None,
        )
        # The task linked to it (tasks_app.demo) moves on between its events, so the session
        # page's time travel shows the task as it was at each point of the conversation.
        write_conversation(
            session,
            rng,
            length,
            actor=Actor.system(agent),
            topic=topic,
            interleave=linked_task_script(project, session.external_id or ""),
        )
        if status in (SessionStatus.PAUSED, SessionStatus.RESUMED):
            transition_session(session, SessionStatus.PAUSED, actor=actor, reason=pause_reason)
        if status == SessionStatus.RESUMED:
            transition_session(
                session, SessionStatus.RESUMED, actor=actor, reason="Approved by operator"
            )
        if status in (SessionStatus.CLOSED, SessionStatus.ARCHIVED):
            transition_session(session, SessionStatus.CLOSED, actor=actor, reason="Resolved")
        if status == SessionStatus.ARCHIVED:
            transition_session(session, SessionStatus.ARCHIVED, actor=actor, reason="Retention")
        if index == 0:
            fork = fork_session(
                session,
                at_seq=max(1, session.head_seq // 2),
                actor=actor,
                title="Retry with a different tone",
            )
            write_conversation(fork, rng, 8, actor=Actor.system(agent), topic=topic)
    near, _ = open_session(
        project,
        agent_name="billing-assistant",
        actor=actor,
        external_id="demo-budget-near",
        title="Budget nearly spent",
        budget_max_tokens=10_000,
        budget_max_cost=Decimal("4.00"),
    )
    # Five assistant messages of 1,800 tokens: 9,000 of 10,000 tokens, $3.60 of $4.00 (90%).
    write_conversation(
        near,
        rng,
        24,
        actor=Actor.system("billing-assistant"),
        topic="bulk invoice reconciliation",
        tokens_per_message=1_800,
    )
    over, _ = open_session(
        project,
        agent_name="billing-assistant",
        actor=actor,
        external_id="demo-budget-over",
        title="Budget exceeded",
        budget_max_tokens=5_000,
    )
    # Seven assistant messages of 900 tokens in one batch: 6,300 of 5,000 tokens. The store
    # takes the batch, then pauses the session and opens its budget handoff.
    write_conversation(
        over,
        rng,
        28,
        actor=Actor.system("billing-assistant"),
        topic="year-end ledger audit",
        tokens_per_message=900,
    )


# Facts an agent learns, each with values that fit it.
FACT_VALUES = {
    "customer_tier": ["gold", "silver", "standard"],
    "locale": ["en-GB", "de-DE", "fr-FR"],
    "priority": ["high", "normal", "low"],
}


def write_conversation(
    session,
    rng: random.Random,
    length: int,
    *,
    actor: Actor,
    topic: str,
    tokens_per_message: int = 120,
    interleave: Iterator[float] | None = None,
) -> None:
    """Append `length` plausible events in batches, through the same service agents use.

    `interleave` (a linked task's script, tasks_app.demo) yields how far into the conversation
    (0..1) to write before it goes on; it is run to its end once the conversation is written.
    """
    batch: list[EventDraft] = []
    script = interleave if interleave is not None else iter(())
    mark = next(script, None)
    for i in range(length):
        while mark is not None and i >= mark * length:
            if batch:  # the events before this point are written before the task moves on
                append_events(session, batch, actor=actor)
                session.refresh_from_db()
                batch = []
                if not session.is_writable:
                    break
            mark = next(script, None)
        if not session.is_writable:
            break
        step = i % 7
        if step == 0:
            draft = EventDraft(
                kind="message",
                role="user",
                content={"text": f"Can you help with the {topic}? (turn {i})"},
            )
        elif step == 1:
            draft = EventDraft(
                kind="tool_call",
                content={"name": "search_docs", "arguments": {"query": topic, "page": i}},
            )
        elif step == 2:
            draft = EventDraft(
                kind="tool_result",
                content={"name": "search_docs", "result": {"hits": rng.randint(0, 9)}},
            )
        elif step == 3:
            draft = EventDraft(
                kind="state",
                content={"turn": i, "topic": topic, "progress": round(i / max(length, 1), 2)},
            )
        elif step == 4:
            key = rng.choice(sorted(FACT_VALUES))
            draft = EventDraft(
                kind="fact", content={"key": key, "value": rng.choice(FACT_VALUES[key])}
            )
        elif step == 5 and i % 3 == 0:
            draft = EventDraft(
                kind="decision",
                content={
                    "decision": "escalate" if i % 2 else "continue",
                    "rationale": "Confidence below threshold" if i % 2 else "Enough context",
                },
            )
        else:
            draft = EventDraft(
                kind="message",
                role="assistant",
                tokens=tokens_per_message,
                cost=Decimal("0.0004") * tokens_per_message,
                content={"text": f"Here is what I found about the {topic}: step {i} done."},
            )
        batch.append(draft)
        if len(batch) == 200:
            append_events(session, batch, actor=actor)
            session.refresh_from_db()
            batch = []
            if not session.is_writable:
                break
    if batch and session.is_writable:
        append_events(session, batch, actor=actor)
        session.refresh_from_db()
    for _ in script:  # the rest of the task's steps, after the conversation
        pass


def build_framework_agents(project: Project) -> list[str]:
    """One agent per agent framework whose adapter is installed (framework_agents: LangGraph,
    the OpenAI Agents SDK, Google ADK; no model calls), each a conversation in a session of its
    own that ends asking a person through the framework's human in the loop, left waiting in
    the queue. Through the real adapters over the HTTP API, answered in this process with a key
    made for it and revoked after. What was done, in lines to print."""
    frameworks = framework_agents.installed()
    missing = [fw for fw in framework_agents.FRAMEWORKS if fw not in frameworks]
    lines = []
    if missing:
        lines.append(
            f"Agent framework demo skipped for {', '.join(missing)}: not installed here "
            "(the client's extras; scripts/test installs them)."
        )
    if not frameworks:
        return lines
    actor = Actor.system("seed_demo")
    key, raw_key = create_api_key(project, name="seed_demo frameworks", actor=actor)
    try:
        names = {fw: f"{fw}-demo-1" for fw in frameworks}
        done = framework_agents.run_in_process(raw_key, frameworks, names)
    finally:
        revoke_api_key(key, actor=actor)
    lines += [f"  {framework_agents.AGENTS[fw]} ({fw}): {done[fw]}" for fw in frameworks]
    return lines


DEMO_APPROVAL = {
    "action_request": {
        "action": "issue_refund",
        "args": {"order": "4411", "amount": "649.00", "currency": "USD", "reason": "late"},
    },
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": True,
    },
    "description": "Refunds over $500 need a person's approval.",
}


def build_demo_handoffs(project: Project, rng: random.Random) -> None:
    """Handoffs waiting of every kind: an approval, a question with choices, a take-over, a
    budget (the overrun of "Budget exceeded" opens it, else one is opened here), one overdue
    and one claimed by the demo operator. Through the services, as agents and people do."""
    system = Actor.system("seed_demo")
    asks = [
        # (agent, title, kind, reason, payload, priority, due_in)
        (
            "billing-assistant",
            "Refund over $500",
            HandoffKind.APPROVAL,
            "Approve a $649 refund for a late order?",
            DEMO_APPROVAL,
            "high",
            None,
        ),
        (
            "support-triage",
            "Shipping address change",
            HandoffKind.QUESTION,
            "Which address should the replacement go to?",
            {
                "question": "Ship the replacement to the old or the new address?",
                "choices": ["old address", "new address", "ask the customer"],
            },
            "normal",
            None,
        ),
        (
            "support-triage",
            "Angry customer on chat",
            HandoffKind.TAKEOVER,
            "The customer asked for a human twice.",
            {"channel": "chat"},
            "urgent",
            None,
        ),
        (
            "research-writer",
            "Quarterly report sources",
            HandoffKind.QUESTION,
            "May I cite the leaked memo?",
            {"question": "The best source is an unpublished memo. May I cite it?"},
            "low",
            1,
        ),
        (
            "code-reviewer",
            "PR #990 force-push",
            HandoffKind.APPROVAL,
            "Force-push to main to undo a bad merge?",
            {
                **DEMO_APPROVAL,
                "action_request": {"action": "git_push", "args": {"branch": "main", "force": True}},
                "description": "Undo a bad merge.",
            },
            "normal",
            None,
        ),
    ]
    created = []
    for index, (agent, title, kind, reason, payload, priority, due_in) in enumerate(asks):
        session, _ = open_session(
            project,
            agent_name=agent,
            actor=system,
            external_id=f"demo-handoff-{index}",
            title=title,
            metadata={"demo": True},
        )
        write_conversation(session, rng, 9, actor=Actor.system(agent), topic=title.lower())
        created.append(
            request_handoff(
                session,
                kind=kind,
                reason=reason,
                payload=payload,
                priority=priority,
                due_in=due_in,
                actor=Actor.system(agent),
            ).handoff
        )
    if not Handoff.objects.filter(
        project=project, kind=HandoffKind.BUDGET, status__in=ACTIVE_STATUSES
    ).exists():
        session, _ = open_session(
            project,
            agent_name="billing-assistant",
            actor=system,
            title="Budget top-up",
            budget_max_tokens=1_000,
        )
        # Past its budget: the store pauses it and opens the budget handoff.
        write_conversation(session, rng, 14, actor=system, topic="ledger", tokens_per_message=500)
    # The one due in a second is overdue a moment later (the SLA job marks it).
    enforce_sla_batch(now=timezone.now() + timedelta(seconds=5))
    operator = get_user_model().objects.get(username="operator")
    claim_handoff(created[-1], user=operator)
