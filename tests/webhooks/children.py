"""Functions tests/multiproc.py runs in child processes (importable by name)."""


def deliver_until_done() -> list[int]:
    """Run the delivery job's batch until nothing is due; returns each batch's size."""
    from core.services.webhooks import deliver_due

    batches: list[int] = []
    while (summary := deliver_due(limit=10)).claimed:
        batches.append(summary.claimed)
    return batches
