"""Layout of a workflow's state diagram: plain coordinates, drawn as SVG by a template.

Nothing here builds markup. `layout(spec)` returns nodes (boxes) and edges (a start point plus
cubic Bézier segments) in user units; templates/tasks_app/_task_panel.html turns them into
<rect>, <path> and <text> elements, autoescaping every label.

The layout is a small Sugiyama-style one, enough for workflows of a few dozen states:

1. a depth-first walk from the initial state finds the back edges (loops such as
   changes_requested → sent_for_review); the rest is acyclic;
2. longest-path layering over the acyclic edges: each state sits one layer below the deepest
   state that leads to it, so every forward edge points down;
3. an edge that spans several layers gets a slim placeholder in each layer it crosses, so it is
   routed around the states in between instead of through them;
4. a few barycenter sweeps order each layer to reduce crossings, then each node is pulled
   towards its neighbours' centres while keeping order and spacing;
5. back edges run up a lane to the right of everything they pass, curving out of the source's
   right side and into the target's.

A definition never changes once stored, so a layout is computed once per process per version.
"""

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from .workflows import TransitionSpec, WorkflowSpec

NODE_HEIGHT = 30
CHAR_WIDTH = 7.2  # a 12px system-ui letter, generously: labels must fit their boxes
LABEL_CHAR_WIDTH = 6.0  # edge labels are 10.5px
NODE_PADDING = 14
MIN_NODE_WIDTH = 84
NODE_GAP = 30  # between neighbours in a layer
DUMMY_WIDTH = 12
LAYER_GAP = 50  # between the bottom of one layer and the top of the next
MARGIN = 10
TOP = 30  # room above the first layer for the initial-state marker
LANE_GAP = 16  # between back-edge lanes
SWEEPS = 4


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(frozen=True)
class Segment:
    """A cubic Bézier from the previous point: `C c1 c2 end` in SVG path terms."""

    c1: Point
    c2: Point
    end: Point


@dataclass(frozen=True)
class DiagramNode:
    state: str
    label: str
    x: float
    y: float
    width: float
    height: float
    initial: bool
    terminal: bool

    @property
    def cx(self) -> float:
        return round(self.x + self.width / 2, 1)

    @property
    def text_y(self) -> float:
        return round(self.y + self.height / 2 + 4, 1)

    # A terminal state is drawn with a second border inside the first (statechart style).
    @property
    def inner_x(self) -> float:
        return round(self.x + 3, 1)

    @property
    def inner_y(self) -> float:
        return round(self.y + 3, 1)

    @property
    def inner_width(self) -> float:
        return round(self.width - 6, 1)

    @property
    def inner_height(self) -> float:
        return round(self.height - 6, 1)


@dataclass(frozen=True)
class DiagramEdge:
    source: str
    target: str
    name: str
    start: Point
    segments: tuple[Segment, ...]
    label: str
    label_at: Point
    # "middle" (on a forward edge), "start" (right of a back edge's lane), "end" (left of a
    # self-loop): the SVG text-anchor.
    label_anchor: str
    back: bool


@dataclass(frozen=True)
class Diagram:
    nodes: tuple[DiagramNode, ...]
    edges: tuple[DiagramEdge, ...]
    width: float
    height: float
    # The initial-state marker: a dot at `entry_from`, an arrow down to the initial state.
    entry_from: Point
    entry_to: Point


@dataclass
class _Slot:
    """A node or a long edge's placeholder in one layer."""

    key: str  # a state, or "\0<edge index>:<layer>" for a placeholder
    layer: int
    width: float
    x: float = 0.0  # centre
    order: float = 0.0


def _label(state: str) -> str:
    return state.replace("_", " ")


def _node_width(text: str) -> float:
    return max(MIN_NODE_WIDTH, round(len(text) * CHAR_WIDTH + 2 * NODE_PADDING))


def _back_edges(spec: WorkflowSpec, edges: list[TransitionSpec]) -> set[int]:
    """Indexes of edges that close a cycle, found by an iterative DFS from the initial state
    (then from any state it did not reach, in declaration order)."""
    outgoing: dict[str, list[int]] = defaultdict(list)
    for index, edge in enumerate(edges):
        outgoing[edge.source].append(index)
    back: set[int] = set()
    done: set[str] = set()
    for root in [spec.initial, *spec.states]:
        if root in done:
            continue
        on_stack = {root}
        stack = [(root, iter(outgoing[root]))]
        while stack:
            state, pending = stack[-1]
            index = next(pending, None)
            if index is None:
                stack.pop()
                on_stack.discard(state)
                done.add(state)
                continue
            target = edges[index].target
            if target in on_stack:
                back.add(index)
            elif target not in done:
                on_stack.add(target)
                stack.append((target, iter(outgoing[target])))
    return back


def _layers(spec: WorkflowSpec, forward: list[TransitionSpec]) -> dict[str, int]:
    """Longest path from the sources, over the acyclic edges (Kahn's order, ties by
    declaration order)."""
    indegree = dict.fromkeys(spec.states, 0)
    outgoing: dict[str, list[str]] = defaultdict(list)
    for edge in forward:
        indegree[edge.target] += 1
        outgoing[edge.source].append(edge.target)
    layer = dict.fromkeys(spec.states, 0)
    ready = [s for s in spec.states if indegree[s] == 0]
    position = {state: i for i, state in enumerate(spec.states)}
    while ready:
        ready.sort(key=position.__getitem__)
        state = ready.pop(0)
        for target in outgoing[state]:
            layer[target] = max(layer[target], layer[state] + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    return layer


def _place(
    rows: list[list[_Slot]],
    neighbours: dict[str, list[str]],
    slots: dict[str, _Slot],
    right_side: set[str],
) -> None:
    """Order each layer by barycenters, then pull each slot towards its neighbours' centres,
    keeping order and spacing (the average of a left-packed and a right-packed pass).

    States in `right_side` (ends of back edges) go last in their layer, so their loop leaves
    or enters from the side without crossing a neighbour."""
    for sweep in range(SWEEPS + 1):
        for row in rows:
            if sweep < SWEEPS:
                for slot in row:
                    around = [slots[n].order for n in neighbours[slot.key]]
                    if around:
                        slot.order = sum(around) / len(around)
                row.sort(key=lambda s: s.order)
            else:
                row.sort(key=lambda s: (s.key in right_side, s.order))
            for i, slot in enumerate(row):
                slot.order = i

    def gap(a: _Slot, b: _Slot) -> float:
        spacing = NODE_GAP if not (a.key.startswith("\0") and b.key.startswith("\0")) else 8
        return a.width / 2 + spacing + b.width / 2

    widest = max((sum(s.width for s in row) + NODE_GAP * (len(row) - 1) for row in rows), default=0)
    for row in rows:  # start centred
        x = (widest - sum(s.width for s in row) - NODE_GAP * (len(row) - 1)) / 2
        for slot in row:
            slot.x = x + slot.width / 2
            x += slot.width + NODE_GAP
    for _ in range(SWEEPS):
        for row in [*rows[1:], *reversed(rows[:-1])]:
            wanted = []
            for slot in row:
                around = [slots[n].x for n in neighbours[slot.key]]
                wanted.append(sum(around) / len(around) if around else slot.x)
            left = list(wanted)
            for i in range(1, len(row)):
                left[i] = max(left[i], left[i - 1] + gap(row[i - 1], row[i]))
            right = list(wanted)
            for i in range(len(row) - 2, -1, -1):
                right[i] = min(right[i], right[i + 1] - gap(row[i], row[i + 1]))
            for slot, a, b in zip(row, left, right, strict=True):
                slot.x = (a + b) / 2
    shift = MARGIN - min((s.x - s.width / 2 for row in rows for s in row), default=0)
    for row in rows:
        for slot in row:
            slot.x += shift


def _curve(a: Point, b: Point) -> Segment:
    """Leave `a` downwards, arrive at `b` from above."""
    bend = (b.y - a.y) / 2
    return Segment(Point(a.x, round(a.y + bend, 1)), Point(b.x, round(b.y - bend, 1)), b)


def _line(a: Point, b: Point) -> Segment:
    return Segment(a, b, b)


def _rounded(way: list[Point], radius: float = 12.0) -> tuple[Point, tuple[Segment, ...]]:
    """An orthogonal path through `way`, its corners rounded: (start, segments)."""

    def towards(a: Point, b: Point, d: float) -> Point:
        length = abs(b.x - a.x) + abs(b.y - a.y)  # orthogonal: one of the two is 0
        if not length:
            return a
        return Point(
            round(a.x + (b.x - a.x) * d / length, 1), round(a.y + (b.y - a.y) * d / length, 1)
        )

    segments: list[Segment] = []
    here = way[0]
    for before, corner, after in zip(way, way[1:], way[2:], strict=False):
        r = min(
            radius,
            (abs(corner.x - before.x) + abs(corner.y - before.y)) / 2,
            (abs(after.x - corner.x) + abs(after.y - corner.y)) / 2,
        )
        entry, leave = towards(corner, before, r), towards(corner, after, r)
        if entry != here:
            segments.append(_line(here, entry))
        segments.append(Segment(corner, corner, leave))
        here = leave
    if way[-1] != here:
        segments.append(_line(here, way[-1]))
    return way[0], tuple(segments)


def _at(a: Point, s: Segment, t: float) -> Point:
    u = 1 - t
    x = u**3 * a.x + 3 * u * u * t * s.c1.x + 3 * u * t * t * s.c2.x + t**3 * s.end.x
    y = u**3 * a.y + 3 * u * u * t * s.c1.y + 3 * u * t * t * s.c2.y + t**3 * s.end.y
    return Point(round(x, 1), round(y, 1))


def _ports(left: float, width: float, count: int) -> list[float]:
    """Where `count` edges leave (or enter) a box side, spread over its middle part."""
    if count == 1:
        return [round(left + width / 2, 1)]
    span = min(width * 0.6, 18.0 * (count - 1))
    first = left + width / 2 - span / 2
    return [round(first + span * i / (count - 1), 1) for i in range(count)]


@lru_cache(maxsize=128)
def layout(spec: WorkflowSpec) -> Diagram:
    edges = list(spec.transitions)
    back = _back_edges(spec, edges)
    loops = {i for i, e in enumerate(edges) if e.source == e.target}
    back -= loops
    forward_ids = [i for i in range(len(edges)) if i not in back and i not in loops]
    layer = _layers(spec, [edges[i] for i in forward_ids])

    slots: dict[str, _Slot] = {}
    position = {state: i for i, state in enumerate(spec.states)}
    for state in spec.states:
        slots[state] = _Slot(state, layer[state], _node_width(_label(state)), order=position[state])
    neighbours: dict[str, list[str]] = defaultdict(list)
    chains: dict[int, list[str]] = {}
    for i in forward_ids:
        edge = edges[i]
        chain = [edge.source]
        for level in range(layer[edge.source] + 1, layer[edge.target]):
            key = f"\0{i}:{level}"
            slots[key] = _Slot(key, level, DUMMY_WIDTH, order=slots[edge.source].order)
            chain.append(key)
        chain.append(edge.target)
        chains[i] = chain
        for upper, lower in zip(chain, chain[1:], strict=False):
            neighbours[upper].append(lower)
            neighbours[lower].append(upper)
    depth = max(layer.values(), default=0) + 1
    rows: list[list[_Slot]] = [[] for _ in range(depth)]
    for slot in slots.values():
        rows[slot.layer].append(slot)
    for row in rows:
        row.sort(key=lambda s: s.order)
    ends = {edges[i].source for i in back} | {edges[i].target for i in back}
    _place(rows, neighbours, slots, ends)

    def top(level: int) -> float:
        return TOP + level * (NODE_HEIGHT + LAYER_GAP)

    nodes = {
        state: DiagramNode(
            state=state,
            label=_label(state),
            x=round(slots[state].x - slots[state].width / 2, 1),
            y=top(layer[state]),
            width=slots[state].width,
            height=NODE_HEIGHT,
            initial=state == spec.initial,
            terminal=spec.is_terminal(state),
        )
        for state in spec.states
    }

    # Ports: out-edges spread along the source's bottom, in-edges along the target's top, each
    # ordered by where the edge goes (comes from), so edges leaving one box do not cross.
    def next_x(i: int) -> float:
        return slots[chains[i][1]].x

    def prev_x(i: int) -> float:
        return slots[chains[i][-2]].x

    out_port: dict[int, float] = {}
    in_port: dict[int, float] = {}
    for state, node in nodes.items():
        leaving = sorted((i for i in forward_ids if edges[i].source == state), key=next_x)
        for i, x in zip(leaving, _ports(node.x, node.width, len(leaving)), strict=True):
            out_port[i] = x
        arriving = sorted((i for i in forward_ids if edges[i].target == state), key=prev_x)
        for i, x in zip(arriving, _ports(node.x, node.width, len(arriving)), strict=True):
            in_port[i] = x

    routes: list[_Route] = []
    for i in forward_ids:
        edge = edges[i]
        source, target = nodes[edge.source], nodes[edge.target]
        start = Point(out_port[i], source.y + source.height)
        points: list[Point] = []
        for key in chains[i][1:-1]:
            slot = slots[key]
            x = round(slot.x, 1)
            points += [Point(x, top(slot.layer)), Point(x, top(slot.layer) + NODE_HEIGHT)]
        points.append(Point(in_port[i], target.y))
        segments: list[Segment] = []
        here = start
        for n, point in enumerate(points):
            segments.append(_line(here, point) if n % 2 else _curve(here, point))
            here = point
        # Label spots: mid-way along the last curve first, then the first, then anywhere.
        froms = [start, *points[:-1]]
        order = [len(segments) - 1, 0, *range(1, len(segments) - 1)]
        spots = [
            (_at(froms[n], segments[n], t), "middle")
            for n in dict.fromkeys(order)
            for t in (0.5, 0.35, 0.65, 0.2, 0.8)
        ]
        routes.append(_Route(edge, start, tuple(segments), False, spots))

    right = max((n.x + n.width for n in nodes.values()), default=MARGIN)
    right = max([right, *(s.x + s.width / 2 for s in slots.values())])
    # Back edges: shorter spans take the inner lanes; each lane clears everything it passes.
    # An end that is the last state of its layer is reached from the side; otherwise from the
    # source's top / the target's bottom, through the gap between layers (crossing edges there,
    # never a state).
    lanes: list[tuple[float, float, float]] = []  # (top layer, bottom layer, x) of lanes taken
    last_in_layer = {
        state: all(
            slots[state].x >= other.x
            for other in rows[layer[state]]
            if not other.key.startswith("\0")
        )
        for state in spec.states
    }
    side_ports: dict[str, list[int]] = defaultdict(list)
    ordered_back = sorted(back, key=lambda i: (layer[edges[i].source] - layer[edges[i].target], i))
    for i in ordered_back:
        side_ports[edges[i].source].append(i)
        side_ports[edges[i].target].append(i)
    port: dict[tuple[int, str], float] = {}  # y on a side, or x on the top/bottom
    for state, ids in side_ports.items():
        node = nodes[state]
        count = len(ids)
        for n, i in enumerate(ids):
            if last_in_layer[state]:
                offset = (n - (count - 1) / 2) * min(8.0, (node.height - 8) / max(count - 1, 1))
                port[(i, state)] = round(node.y + node.height / 2 + offset, 1)
            else:  # right of the forward edges' ports, which spread over the middle
                port[(i, state)] = round(node.x + node.width - 8 - 7 * n, 1)
    for i in ordered_back:
        edge = edges[i]
        source, target = nodes[edge.source], nodes[edge.target]
        low, high = layer[edge.target], layer[edge.source]
        x = max(s.x + s.width / 2 for s in slots.values() if low <= s.layer <= high) + LANE_GAP
        for lane_top, lane_bottom, lane_x in lanes:
            if lane_top <= high and low <= lane_bottom:
                x = max(x, lane_x + LANE_GAP)
        lanes.append((low, high, x))
        x = round(x, 1)
        if last_in_layer[edge.source]:
            way = [Point(source.x + source.width, port[(i, edge.source)])]
        else:
            gap_y = round(source.y - LAYER_GAP / 2 + 6, 1)
            way = [Point(port[(i, edge.source)], source.y), Point(port[(i, edge.source)], gap_y)]
        lane_bottom = Point(x, way[-1].y)
        way.append(lane_bottom)
        if last_in_layer[edge.target]:
            lane_top = Point(x, port[(i, edge.target)])
            way += [lane_top, Point(target.x + target.width, lane_top.y)]
        else:
            lane_top = Point(x, round(target.y + target.height + LAYER_GAP / 2 - 6, 1))
            px = port[(i, edge.target)]
            way += [lane_top, Point(px, lane_top.y), Point(px, target.y + target.height)]
        start, segments = _rounded(way)
        # Label spots: right of the lane, from its middle outwards.
        span = lane_bottom.y - lane_top.y
        spots = [
            (Point(x + 4, round(lane_top.y + span * t + 3, 1)), "start")
            for t in (0.5, 0.3, 0.7, 0.15, 0.85)
        ]
        routes.append(_Route(edge, start, segments, True, spots))
    # A transition back into the same state loops on the state's left side (back edges use
    # the right side, forward edges the top and bottom).
    for i in sorted(loops):
        edge = edges[i]
        node = nodes[edge.source]
        sx, cy = node.x, node.y + node.height / 2
        segments = (Segment(Point(sx - 34, cy - 26), Point(sx - 34, cy + 26), Point(sx, cy + 7)),)
        spots = [
            (Point(sx - 16, round(cy - 18, 1)), "end"),
            (Point(sx - 16, round(cy + 26, 1)), "end"),
        ]
        routes.append(_Route(edge, Point(sx, cy - 7), segments, True, spots))

    drawn = _label_routes(routes, list(nodes.values()))
    right = max([right, *(lane_x for _, _, lane_x in lanes)])
    extra_right = max(
        [
            0.0,
            *(_label_box(e.label, e.label_at, e.label_anchor)[2] - right for e in drawn if e.label),
        ]
    )
    left_overhang = max(
        [
            0.0,
            *(
                MARGIN / 2 - _label_box(e.label, e.label_at, e.label_anchor)[0]
                for e in drawn
                if e.label
            ),
            *(MARGIN + 28 - nodes[edges[i].source].x for i in loops),
        ]
    )
    width = round(right + extra_right + MARGIN + left_overhang, 1)
    height = round(top(depth - 1) + NODE_HEIGHT + MARGIN, 1)
    result = Diagram(
        nodes=tuple(nodes[s] for s in spec.states),
        edges=tuple(drawn),
        width=width,
        height=height,
        entry_from=Point(nodes[spec.initial].cx, TOP - 22),
        entry_to=Point(nodes[spec.initial].cx, TOP),
    )
    return _shifted(result, round(left_overhang, 1)) if left_overhang else result


@dataclass
class _Route:
    edge: TransitionSpec
    start: Point
    segments: tuple[Segment, ...]
    back: bool
    spots: list[tuple[Point, str]]  # where its label may go, best first


def _label_box(text: str, at: Point, anchor: str) -> tuple[float, float, float, float]:
    width = len(text) * LABEL_CHAR_WIDTH + 4
    left = {"middle": at.x - width / 2, "end": at.x - width + 2}.get(anchor, at.x - 2)
    return (left, at.y - 9, left + width, at.y + 3)


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _label_routes(routes: list[_Route], nodes: list[DiagramNode]) -> list[DiagramEdge]:
    """Give each edge's label the first of its spots that covers no state and no label placed
    before it (greedy; the best spot if none is free)."""
    taken = [(n.x, n.y, n.x + n.width, n.y + n.height) for n in nodes]
    drawn = []
    for route in routes:
        label = _label(route.edge.name)
        at, anchor = route.spots[0]
        if label:
            for spot, spot_anchor in route.spots:
                box = _label_box(label, spot, spot_anchor)
                if not any(_overlaps(box, other) for other in taken):
                    at, anchor = spot, spot_anchor
                    break
            taken.append(_label_box(label, at, anchor))
        drawn.append(
            DiagramEdge(
                source=route.edge.source,
                target=route.edge.target,
                name=route.edge.name,
                start=route.start,
                segments=route.segments,
                label=label,
                label_at=at,
                label_anchor=anchor,
                back=route.back,
            )
        )
    return drawn


def _shifted(diagram: Diagram, dx: float) -> Diagram:
    """The same diagram moved right by `dx` (room for a label sticking out on the left)."""

    def p(point: Point) -> Point:
        return Point(round(point.x + dx, 1), point.y)

    return Diagram(
        nodes=tuple(
            DiagramNode(
                n.state, n.label, round(n.x + dx, 1), n.y, n.width, n.height, n.initial, n.terminal
            )
            for n in diagram.nodes
        ),
        edges=tuple(
            DiagramEdge(
                e.source,
                e.target,
                e.name,
                p(e.start),
                tuple(Segment(p(s.c1), p(s.c2), p(s.end)) for s in e.segments),
                e.label,
                p(e.label_at),
                e.label_anchor,
                e.back,
            )
            for e in diagram.edges
        ),
        width=diagram.width,
        height=diagram.height,
        entry_from=p(diagram.entry_from),
        entry_to=p(diagram.entry_to),
    )
