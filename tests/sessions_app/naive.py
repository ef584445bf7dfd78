"""Deliberately naive reference implementations the session store is checked against.

They read everything and fold from seq 1, and resolve lineage by walking `parent`/`fork_seq`
(not the denormalised `ancestry` the product reads), so they share no shortcut with the code
under test.
"""

from typing import Any

from sessions_app.models import Event, Session


def rfc7386_merge(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2, the pseudo-code transcribed."""
    if isinstance(patch, dict):
        if not isinstance(target, dict):
            target = {}
        result = dict(target)
        for name, value in patch.items():
            if value is None:
                if name in result:
                    del result[name]
            else:
                result[name] = rfc7386_merge(result.get(name), value)
        return result
    return patch


def visible_events(session: Session, upto: int | None = None) -> list[Event]:
    """Every event of `session`'s history with seq <= upto, in seq order, by walking parents."""
    own = Event.objects.filter(session=session).order_by("seq")
    if upto is not None:
        own = own.filter(seq__lte=upto)
    inherited: list[Event] = []
    if session.parent_id is not None:
        assert session.fork_seq is not None
        limit = session.fork_seq if upto is None else min(upto, session.fork_seq)
        inherited = visible_events(Session.objects.get(pk=session.parent_id), limit)
        own = own.filter(seq__gt=session.fork_seq)
    return inherited + list(own)


def fold(events: list[Event] | list[dict[str, Any]], upto: int) -> tuple[dict, dict]:
    """(working state, facts) after every event with seq <= upto, from an empty start."""
    state: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    for event in events:
        seq, kind, content = (
            (event["seq"], event["kind"], event["content"])
            if isinstance(event, dict)
            else (event.seq, event.kind, event.content)
        )
        if seq > upto:
            break
        if kind == "state":
            state = rfc7386_merge(state, content)
        elif kind == "fact":
            facts[content["key"]] = {"value": content["value"], "seq": seq}
    return state, facts
