"""A process adding items to one SDK session: `python adder.py URL KEY NAMESPACE SESSION_ID WHO
COUNT` prints "ready" once set up, waits for a line on stdin, then adds COUNT user messages
"WHO-i", one add_items call each (so two such processes add at the same time)."""

import asyncio
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


if __name__ == "__main__":
    url, key, namespace, session_id, who, count = sys.argv[1:]
    asyncio.run(main(url, key, namespace, session_id, who, int(count)))
