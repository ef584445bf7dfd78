"""An agent process for the scale-out test: several agents, each an asyncio task, appending
keyed batches through two servers as a load balancer would spread them.

    python tests/scale/fleet.py CONFIG_JSON

CONFIG_JSON: {"servers": [base URLs], "key", "sessions": {agent number: session id},
"batch": events per batch, "pause": seconds between an agent's batches, "stop_file",
"deadline": monotonic-clock seconds}.

Agent n sends batch b to servers[(n + b) % len(servers)]. Every event carries an idempotency key
(a<agent>-<batch>-<i>); a batch answered 5xx or not answered at all (a server killed) is sent
again, the same body with the same keys, to the next server, until it is acknowledged (200 or
201) or the deadline passes. An agent starts no new batch once stop_file exists. Prints one JSON
line: the acknowledged keys, the keys never acknowledged, the count of answers by server and
status ("error" for no answer).
"""

import asyncio
import json
import os
import sys
import time
from collections import Counter

import httpx


async def agent(
    client: httpx.AsyncClient, number: int, session_id: str, config: dict, result: dict
) -> None:
    servers = config["servers"]
    headers = {"Authorization": f"Bearer {config['key']}"}
    batch = 0
    while not os.path.exists(config["stop_file"]):
        keys = [f"a{number}-{batch}-{i}" for i in range(config["batch"])]
        body = {
            "events": [
                {
                    "kind": "message",
                    "role": "assistant",
                    "content": {"text": k},
                    "idempotency_key": k,
                }
                for k in keys
            ]
        }
        attempt = 0
        while True:
            if time.monotonic() > config["deadline"]:
                result["unacked"].extend(keys)
                return
            server = servers[(number + batch + attempt) % len(servers)]
            try:
                response = await client.post(
                    f"{server}/api/v1/sessions/{session_id}/events", json=body, headers=headers
                )
            except httpx.TransportError:
                result["statuses"][f"{server} error"] += 1
            else:
                result["statuses"][f"{server} {response.status_code}"] += 1
                if response.status_code in (200, 201):
                    result["acked"].extend(keys)
                    break
                if response.status_code < 500:
                    raise SystemExit(f"refused: {response.status_code} {response.text[:300]}")
            attempt += 1
            await asyncio.sleep(0.05)
        batch += 1
        await asyncio.sleep(config["pause"])


async def main(config: dict) -> dict:
    result: dict = {"acked": [], "unacked": [], "statuses": Counter()}
    # One connection pool per process, as an agent runtime holding several agents would have.
    async with httpx.AsyncClient(timeout=10) as client:
        await asyncio.gather(
            *(
                agent(client, int(number), session_id, config, result)
                for number, session_id in config["sessions"].items()
            )
        )
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
