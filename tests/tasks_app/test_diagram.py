"""The state diagram's layout: every state drawn once, inside the canvas, forward edges pointing
down, loops detected, and no edge drawn through a state — for the shipped workflows, awkward
hand-made ones and generated ones."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tasks_app.diagram import Diagram, _at, layout
from tasks_app.workflows import BUILTIN_WORKFLOWS, WorkflowSpec, parse_workflow


def workflow(
    states: list[str], transitions: list[tuple[str, str, str]], terminal: list[str] | None = None
) -> WorkflowSpec:
    return parse_workflow(
        {
            "name": "drawn",
            "version": 1,
            "states": states,
            "initial": states[0],
            "terminal": terminal or [states[-1]],
            "transitions": [{"from": a, "to": b, "name": n} for a, b, n in transitions],
        }
    )


TWO_LOOPS = workflow(
    ["a", "b", "c", "d", "e"],
    [
        ("a", "b", "go"),
        ("a", "c", "alt"),
        ("b", "d", "x"),
        ("c", "d", "y"),
        ("d", "b", "back_b"),
        ("d", "c", "back_c"),
        ("d", "e", "done"),
        ("c", "a", "restart"),
    ],
)
WIDE = workflow(
    ["start", "p1", "p2", "p3", "p4", "join", "fin"],
    [
        ("start", "p1", ""),
        ("start", "p2", ""),
        ("start", "p3", ""),
        ("start", "p4", ""),
        ("p1", "join", ""),
        ("p2", "join", ""),
        ("p3", "join", ""),
        ("p4", "join", ""),
        ("join", "fin", ""),
        ("p2", "start", "redo"),
        ("join", "p3", "again"),
        ("start", "fin", "skip"),
    ],
)
SELF_LOOP = workflow(
    ["a", "b", "z"],
    [("a", "a", "again"), ("a", "b", "next"), ("b", "z", "end"), ("b", "a", "retry")],
)


def crossings(diagram: Diagram) -> list[str]:
    """Edges that pass through a state other than their own ends (sampled along each curve)."""
    found = []
    for edge in diagram.edges:
        here = edge.start
        for segment in edge.segments:
            for k in range(1, 40):
                point = _at(here, segment, k / 40)
                for node in diagram.nodes:
                    inside = (
                        node.x + 1 < point.x < node.x + node.width - 1
                        and node.y + 1 < point.y < node.y + node.height - 1
                    )
                    if inside and not (edge.source == edge.target == node.state):
                        found.append(f"{edge.source}->{edge.target} through {node.state}")
            here = segment.end
    return found


def check(spec: WorkflowSpec) -> Diagram:
    diagram = layout(spec)
    assert [n.state for n in diagram.nodes] == list(spec.states)
    assert len(diagram.edges) == len(spec.transitions)
    for node in diagram.nodes:
        assert node.x >= 0 and node.x + node.width <= diagram.width, node
        assert node.y >= 0 and node.y + node.height <= diagram.height, node
        assert len(node.label) * 6 < node.width  # the label fits its box
    nodes = {n.state: n for n in diagram.nodes}
    for edge in diagram.edges:
        if not edge.back:
            assert nodes[edge.target].y > nodes[edge.source].y, edge  # forward edges go down
        ends = [edge.start, *(s.end for s in edge.segments)]
        assert all(0 <= p.x <= diagram.width and 0 <= p.y <= diagram.height for p in ends)
        assert 0 <= edge.label_at.x <= diagram.width
    assert crossings(diagram) == []
    return diagram


def test_it_lays_out_the_shipped_workflows_top_down_with_loops_on_the_side():
    for spec in BUILTIN_WORKFLOWS.values():
        check(spec)
    approval = layout(BUILTIN_WORKFLOWS["document_approval"])
    back = [(e.source, e.target) for e in approval.edges if e.back]
    assert back == [("changes_requested", "sent_for_review")]
    y = {n.state: n.y for n in approval.nodes}
    assert y["draft_created"] < y["sent_for_review"] < y["approved"] < y["published"]
    # Labels are the transition names, readable.
    assert {e.label for e in approval.edges} >= {"request changes", "resubmit"}


def test_it_routes_awkward_workflows_around_their_states():
    for spec in (TWO_LOOPS, WIDE, SELF_LOOP):
        check(spec)
    loop = next(e for e in layout(SELF_LOOP).edges if e.source == e.target)
    assert loop.back and loop.label == "again"


def test_it_computes_a_layout_once_per_definition():
    assert layout(WIDE) is layout(WIDE)


@st.composite
def workflows(draw: st.DrawFn) -> WorkflowSpec:
    """A valid workflow: a chain s0 → … → sN (so every state is reachable and can finish)
    plus random extra transitions, back edges and self-loops among the non-terminal states."""
    count = draw(st.integers(min_value=2, max_value=9))
    states = [f"s{i}" for i in range(count)]
    pairs = {(states[i], states[i + 1]) for i in range(count - 1)}
    extra = draw(
        st.lists(st.tuples(st.integers(0, count - 2), st.integers(0, count - 1)), max_size=12)
    )
    pairs |= {(states[a], states[b]) for a, b in extra}
    names = draw(
        st.lists(
            st.sampled_from(["", "go", "retry", "request_changes", "x"]),
            min_size=len(pairs),
            max_size=len(pairs),
        )
    )
    transitions = []
    used: set[tuple[str, str]] = set()
    for (source, target), name in zip(sorted(pairs), names, strict=True):
        if name and (source, name) in used:
            name = ""
        used.add((source, name))
        transitions.append((source, target, name))
    return workflow(states, transitions)


@settings(max_examples=80, deadline=None)
@given(workflows())
def test_it_lays_out_any_valid_workflow(spec):
    check(spec)
