"""A summariser plugged in by dotted path in tests."""


def shout(previous: str, events: list[dict]) -> str:
    return f"{len(events)} TRANSIENT EVENTS"


def refuse_poison(previous: str, events: list[dict]) -> str:
    """Fails on a session whose messages say "poison" (one bad session in a run)."""
    if any(e.get("text") == "poison" for e in events):
        raise ValueError("poisoned transcript")
    return f"{len(events)} events"
