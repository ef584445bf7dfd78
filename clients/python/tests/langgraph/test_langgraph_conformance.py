"""LangGraph's own checkpointer tests (langgraph-checkpoint-conformance) against
SwitchboardSaver on a live server: every base and extended capability, with the counts of
the installed suite asserted, none failed or skipped."""

import asyncio
import uuid

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.langgraph import SwitchboardSaver

# Tests per capability in langgraph-checkpoint-conformance 0.0.2 (its ALL_*_TESTS lists).
EXPECTED = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


def run_conformance(url: str, key: str, retry: RetryPolicy):
    async def scenario():
        async with AsyncClient(url, key, retry=retry) as client:

            @checkpointer_test(name="SwitchboardSaver")
            async def saver():
                # A namespace per capability: delete_for_runs looks through every thread of
                # its namespace, and each suite's are its own.
                yield SwitchboardSaver(client, namespace=f"conformance-{uuid.uuid4().hex}/")

            return await validate(saver)

    return asyncio.run(scenario())


def test_the_saver_passes_every_capability_of_langgraphs_conformance_suite(
    server_url, api_key, sb, capsys
):
    report = run_conformance(server_url, api_key, sb.retry)
    with capsys.disabled():
        report.print_report()
    counts = {
        name: (r.tests_passed, r.tests_failed, r.tests_skipped)
        for name, r in report.results.items()
    }
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    assert counts == {name: (n, 0, 0) for name, n in EXPECTED.items()}
    assert {c.value for c in ALL_CAPABILITIES} == set(EXPECTED)
    assert report.conformance_level() == "FULL"
