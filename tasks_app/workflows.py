"""Workflow definitions: parsing, validation, and the two example workflows that ship with the app.

A definition is plain data: states, an initial state, terminal states, the allowed transitions
(from → to, optionally named, optionally reopening steps when a loop goes round again) and the
declared steps (key, title, max attempts). It comes from code, from a YAML/JSON file or from the
API, always through `parse_workflow`, and is stored immutably per (name, version): a task keeps
the version it started with, whatever is registered later.
"""

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from core.text import dotted, find_unstorable

from .errors import InvalidInput

NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,99}$")
IDENT_RE = re.compile(r"^[a-z][a-z0-9_]{0,99}$")
MAX_ATTEMPTS_LIMIT = 100
WORKFLOW_DIR = Path(__file__).resolve().parent / "workflows"

_TOP_KEYS = {
    "name",
    "version",
    "title",
    "description",
    "states",
    "initial",
    "terminal",
    "transitions",
    "steps",
}
_TRANSITION_KEYS = {"from", "to", "name", "reopen"}
_STEP_KEYS = {"key", "title", "max_attempts"}


@dataclass(frozen=True)
class TransitionSpec:
    source: str
    target: str
    name: str = ""
    # Steps set back to pending (next round, attempts from zero) when this transition is taken:
    # how a loop such as changes_requested → sent_for_review runs its review again.
    reopen: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.target,
            "name": self.name,
            "reopen": list(self.reopen),
        }


@dataclass(frozen=True)
class StepSpec:
    key: str
    title: str
    max_attempts: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "max_attempts": self.max_attempts}


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    version: int
    states: tuple[str, ...]
    initial: str
    terminal: frozenset[str]
    transitions: tuple[TransitionSpec, ...]
    steps: tuple[StepSpec, ...] = ()
    title: str = ""
    description: str = ""
    _outgoing: dict[str, tuple[TransitionSpec, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        outgoing: dict[str, list[TransitionSpec]] = {state: [] for state in self.states}
        for transition in self.transitions:
            outgoing.setdefault(transition.source, []).append(transition)
        object.__setattr__(self, "_outgoing", {k: tuple(v) for k, v in outgoing.items()})

    def is_terminal(self, state: str) -> bool:
        return state in self.terminal

    def allowed_from(self, state: str) -> tuple[TransitionSpec, ...]:
        return self._outgoing.get(state, ())

    def allowed_targets(self, state: str) -> list[str]:
        return sorted({t.target for t in self.allowed_from(state)})

    def find_transition(
        self, state: str, *, to: str | None = None, name: str | None = None
    ) -> TransitionSpec | None:
        for transition in self.allowed_from(state):
            if to is not None and transition.target != to:
                continue
            if name is not None and transition.name != name:
                continue
            return transition
        return None

    def step(self, key: str) -> StepSpec | None:
        return next((s for s in self.steps if s.key == key), None)

    def as_dict(self) -> dict[str, Any]:
        """The canonical stored form (what the API returns and the content hash covers)."""
        return {
            "name": self.name,
            "version": self.version,
            "title": self.title,
            "description": self.description,
            "states": list(self.states),
            "initial": self.initial,
            "terminal": [s for s in self.states if s in self.terminal],
            "transitions": [t.as_dict() for t in self.transitions],
            "steps": [s.as_dict() for s in self.steps],
        }

    @property
    def content_hash(self) -> str:
        canonical = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# --- Parsing and validation -------------------------------------------------------------------


class _Problems(list[str]):
    def unknown_keys(self, where: str, data: Mapping[str, Any], allowed: set[str]) -> None:
        extra = sorted(set(data) - allowed)
        if extra:
            self.append(f"{where}: unknown key(s) {', '.join(map(str, extra))}")


def _ident(value: Any, where: str, problems: _Problems) -> str:
    if not isinstance(value, str) or not IDENT_RE.fullmatch(value):
        problems.append(
            f"{where}: {value!r} is not an identifier (lowercase letters, digits, underscores; "
            "starting with a letter; at most 100 characters)"
        )
        return ""
    return value


def _string_list(value: Any, where: str, problems: _Problems) -> list[str]:
    if not isinstance(value, list) or not value:
        problems.append(f"{where}: must be a non-empty list")
        return []
    return [_ident(item, f"{where}[{i}]", problems) for i, item in enumerate(value)]


def parse_workflow(data: Any) -> WorkflowSpec:
    """Validate a definition (a mapping, as from YAML/JSON) and return its spec.

    Raises InvalidInput (422) listing every problem at once in detail["problems"]: unknown keys,
    bad identifiers, undeclared states or steps, duplicate transitions, states unreachable from
    the initial state, transitions out of terminal states, and dead ends (non-terminal states
    from which no terminal state can be reached).
    """
    problems = _Problems()
    if not isinstance(data, Mapping):
        raise InvalidInput(
            "A workflow definition must be a mapping.",
            detail={"problems": ["the document is not a mapping"]},
        )
    problems.unknown_keys("workflow", data, _TOP_KEYS)
    unstorable = find_unstorable(data)
    if unstorable is not None:  # a file read by loadworkflows reaches here unchecked
        path, problem = unstorable
        problems.append(f"{dotted(path)}: holds {problem}; it cannot be stored")

    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        problems.append("name: lowercase letters, digits, '_', '.', '-'; at most 100 characters")
        name = ""
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.append("version: must be an integer of at least 1")
        version = 0
    title = data.get("title", "") or ""
    description = data.get("description", "") or ""
    if not isinstance(title, str) or len(title) > 200:
        problems.append("title: a string of at most 200 characters")
        title = ""
    if not isinstance(description, str):
        problems.append("description: must be a string")
        description = ""

    states = _string_list(data.get("states"), "states", problems)
    state_set = set(states)
    if len(state_set) != len(states):
        problems.append("states: a state is declared twice")
    initial = data.get("initial")
    if initial not in state_set:
        problems.append(f"initial: {initial!r} is not one of the states")
    terminal = set(_string_list(data.get("terminal"), "terminal", problems))
    for state in sorted(terminal - state_set):
        if state:
            problems.append(f"terminal: {state!r} is not one of the states")
    if initial in terminal:
        problems.append("initial: the initial state cannot be terminal")

    steps: list[StepSpec] = []
    raw_steps = data.get("steps", []) or []
    if not isinstance(raw_steps, list):
        problems.append("steps: must be a list")
        raw_steps = []
    for i, raw in enumerate(raw_steps):
        where = f"steps[{i}]"
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: must be a mapping")
            continue
        problems.unknown_keys(where, raw, _STEP_KEYS)
        key = _ident(raw.get("key"), f"{where}.key", problems)
        step_title = raw.get("title") or key.replace("_", " ").capitalize()
        max_attempts = raw.get("max_attempts", 1)
        if (
            isinstance(max_attempts, bool)
            or not isinstance(max_attempts, int)
            or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            problems.append(f"{where}.max_attempts: an integer from 1 to {MAX_ATTEMPTS_LIMIT}")
            max_attempts = 1
        if not isinstance(step_title, str) or len(step_title) > 200:
            problems.append(f"{where}.title: a string of at most 200 characters")
            step_title = key
        if key and any(s.key == key for s in steps):
            problems.append(f"{where}.key: step {key!r} is declared twice")
        steps.append(StepSpec(key=key, title=step_title, max_attempts=max_attempts))
    step_keys = {s.key for s in steps}

    transitions: list[TransitionSpec] = []
    raw_transitions = data.get("transitions")
    if not isinstance(raw_transitions, list) or not raw_transitions:
        problems.append("transitions: must be a non-empty list")
        raw_transitions = []
    seen_pairs: set[tuple[str, str]] = set()
    seen_names: set[tuple[str, str]] = set()
    for i, raw in enumerate(raw_transitions):
        where = f"transitions[{i}]"
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: must be a mapping")
            continue
        problems.unknown_keys(where, raw, _TRANSITION_KEYS)
        source = _ident(raw.get("from"), f"{where}.from", problems)
        target = _ident(raw.get("to"), f"{where}.to", problems)
        tname = raw.get("name", "") or ""
        if tname:
            tname = _ident(tname, f"{where}.name", problems)
        for end, state in (("from", source), ("to", target)):
            if state and state not in state_set:
                problems.append(f"{where}.{end}: {state!r} is not one of the states")
        if source in terminal:
            problems.append(f"{where}: {source!r} is terminal; nothing leaves a terminal state")
        if (source, target) in seen_pairs:
            problems.append(f"{where}: {source} → {target} is declared twice")
        seen_pairs.add((source, target))
        if tname and (source, tname) in seen_names:
            problems.append(f"{where}.name: {tname!r} is used twice from {source!r}")
        seen_names.add((source, tname))
        reopen = raw.get("reopen", []) or []
        if not isinstance(reopen, list):
            problems.append(f"{where}.reopen: must be a list of step keys")
            reopen = []
        for key in reopen:
            if key not in step_keys:
                problems.append(f"{where}.reopen: {key!r} is not a declared step")
        transitions.append(
            TransitionSpec(
                source=source, target=target, name=tname, reopen=tuple(str(k) for k in reopen)
            )
        )

    if not problems:
        problems.extend(_graph_problems(states, initial, terminal, transitions))
    if problems:
        raise InvalidInput(
            f"The workflow definition {name or '(unnamed)'!s} is invalid.",
            detail={"problems": list(problems)},
        )
    return WorkflowSpec(
        name=name,
        version=version,
        states=tuple(states),
        initial=initial,
        terminal=frozenset(terminal),
        transitions=tuple(transitions),
        steps=tuple(steps),
        title=title,
        description=description,
    )


def _graph_problems(
    states: list[str], initial: str, terminal: set[str], transitions: list[TransitionSpec]
) -> list[str]:
    forward: dict[str, set[str]] = {s: set() for s in states}
    backward: dict[str, set[str]] = {s: set() for s in states}
    for t in transitions:
        forward[t.source].add(t.target)
        backward[t.target].add(t.source)
    reachable = _closure({initial}, forward)
    can_finish = _closure(set(terminal), backward)
    problems = [
        f"states: {s!r} cannot be reached from {initial!r}" for s in states if s not in reachable
    ]
    problems += [
        f"states: no terminal state can be reached from {s!r} (a dead end)"
        for s in states
        if s in reachable and s not in can_finish
    ]
    return problems


def _closure(start: set[str], edges: dict[str, set[str]]) -> set[str]:
    seen = set(start)
    frontier = list(start)
    while frontier:
        for nxt in edges[frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


@lru_cache(maxsize=256)
def _cached_spec(content_hash: str, canonical: str) -> WorkflowSpec:
    return parse_workflow(json.loads(canonical))


def spec_from_stored(definition: dict[str, Any], content_hash: str) -> WorkflowSpec:
    """The spec of a stored definition, parsed once per process (stored rows never change)."""
    return _cached_spec(content_hash, json.dumps(definition, sort_keys=True))


def load_workflow_file(path: str | Path) -> WorkflowSpec:
    """Parse a .yaml/.yml/.json definition file. Raises InvalidInput naming the file."""
    path = Path(path)
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InvalidInput(
            f"{path.name} is not valid {path.suffix[1:].upper()}.",
            detail={"file": str(path), "problems": [str(exc)]},
        ) from None
    try:
        return parse_workflow(data)
    except InvalidInput as exc:
        exc.detail = {"file": str(path), **exc.detail}
        raise


# --- The example workflows ---------------------------------------------------------------------

DOCUMENT_APPROVAL = parse_workflow(
    {
        "name": "document_approval",
        "version": 1,
        "title": "Document approval",
        "description": (
            "A document is drafted, sent for review, revised until the reviewer approves or "
            "rejects it, then published. The review step waits on the reviewer's decision "
            "(signal `review_decision`)."
        ),
        "states": [
            "draft_created",
            "sent_for_review",
            "changes_requested",
            "approved",
            "published",
            "rejected",
        ],
        "initial": "draft_created",
        "terminal": ["published", "rejected"],
        "transitions": [
            {"from": "draft_created", "to": "sent_for_review", "name": "submit"},
            {"from": "sent_for_review", "to": "changes_requested", "name": "request_changes"},
            {
                "from": "changes_requested",
                "to": "sent_for_review",
                "name": "resubmit",
                "reopen": ["review", "revise"],
            },
            {"from": "sent_for_review", "to": "approved", "name": "approve"},
            {"from": "sent_for_review", "to": "rejected", "name": "reject"},
            {"from": "approved", "to": "published", "name": "publish"},
        ],
        "steps": [
            {"key": "draft", "title": "Write the draft", "max_attempts": 3},
            {"key": "review", "title": "Reviewer decision", "max_attempts": 2},
            {"key": "revise", "title": "Apply requested changes", "max_attempts": 3},
            {"key": "publish", "title": "Publish the document", "max_attempts": 5},
        ],
    }
)

RESEARCH_REPORT = parse_workflow(
    {
        "name": "research_report",
        "version": 1,
        "title": "Research report",
        "description": (
            "Research a question, draft a report, review it, publish it. Review branches: approve "
            "(publish), revise (back to drafting), more research (back to researching) or abandon."
        ),
        "states": ["researching", "drafting", "reviewing", "publishing", "published", "abandoned"],
        "initial": "researching",
        "terminal": ["published", "abandoned"],
        "transitions": [
            {"from": "researching", "to": "drafting", "name": "draft"},
            {"from": "researching", "to": "abandoned", "name": "abandon"},
            {"from": "drafting", "to": "reviewing", "name": "submit"},
            {"from": "drafting", "to": "abandoned", "name": "abandon"},
            {"from": "reviewing", "to": "publishing", "name": "approve"},
            {
                "from": "reviewing",
                "to": "drafting",
                "name": "revise",
                "reopen": ["draft", "review"],
            },
            {
                "from": "reviewing",
                "to": "researching",
                "name": "more_research",
                "reopen": ["research", "draft", "review"],
            },
            {"from": "reviewing", "to": "abandoned", "name": "abandon"},
            {"from": "publishing", "to": "published", "name": "publish"},
        ],
        "steps": [
            {"key": "research", "title": "Gather sources", "max_attempts": 3},
            {"key": "draft", "title": "Draft the report", "max_attempts": 3},
            {"key": "review", "title": "Review the draft", "max_attempts": 2},
            {"key": "publish", "title": "Publish the report", "max_attempts": 5},
        ],
    }
)

# Registered from code: every project can start these without registering anything.
BUILTIN_WORKFLOWS: dict[str, WorkflowSpec] = {
    spec.name: spec for spec in (DOCUMENT_APPROVAL, RESEARCH_REPORT)
}
