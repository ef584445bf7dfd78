"""A process adding items to one SDK session: `python adder.py URL KEY NAMESPACE SESSION_ID WHO
COUNT` prints "ready" once set up, waits for a line on stdin, then adds COUNT user messages
"WHO-i", one add_items call each (so two such processes add at the same time)."""

import asyncio
import subprocess
import sys

from switchboard_client import AsyncClient
from switchboard_client.openai_agents import SwitchboardSession


async def main(url: str, key: str, namespace: str, session_id: str, who: str, count: int) -> None:
    async with AsyncClient(url, key) as client:
        session = SwitchboardSession(session_id, client, namespace=namespace)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for i in range(count):
            await session.add_items([{"role": "user", "content": f"{who}-{i}"}])


def start_adders(
    url: str, key: str, namespace: str, session_id: str, count: int, writers: tuple[str, ...]
) -> list[subprocess.Popen[str]]:
    """One adder process per writer, each ready (set up, waiting for `go`)."""
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, url, key, namespace, session_id, who, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for who in writers
    ]
    assert [p.stdout.readline().strip() for p in processes if p.stdout] == ["ready"] * len(writers)
    return processes


def go(processes: list[subprocess.Popen[str]]) -> None:
    """Start the adders' adding, all at once."""
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()


if __name__ == "__main__":
    url, key, namespace, session_id, who, count = sys.argv[1:]
    asyncio.run(main(url, key, namespace, session_id, who, int(count)))
