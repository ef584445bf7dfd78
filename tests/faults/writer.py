"""A writer process for the ingestion fault tests: appends keyed batches through the HTTP API.

    python tests/faults/writer.py BASE_URL API_KEY SESSION_ID WRITER BATCHES BATCH_SIZE DEADLINE

Every event carries an idempotency key (w<writer>-<batch>-<i>). A batch answered 503, 5xx or not
answered at all (connection refused or reset: a worker killed, the database restarting) is sent
again, the same body with the same keys, until it is acknowledged (200 or 201) or the deadline
(a monotonic-clock time in seconds) passes. Prints one JSON line: the acknowledged keys, the
keys never acknowledged, and the count of answers by status ("error" for no answer).
"""

import json
import sys
import time
import urllib.error
import urllib.request
from collections import Counter


def main(
    base_url: str, key: str, session_id: str, writer: str, batches: int, size: int, deadline: float
) -> dict:
    url = f"{base_url}/api/v1/sessions/{session_id}/events"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    acked: list[str] = []
    unacked: list[str] = []
    statuses: Counter[str] = Counter()
    for batch in range(batches):
        keys = [f"w{writer}-{batch}-{i}" for i in range(size)]
        body = json.dumps(
            {
                "events": [
                    {
                        "kind": "message",
                        "role": "agent",
                        "content": {"text": k},
                        "idempotency_key": k,
                    }
                    for k in keys
                ]
            }
        ).encode()
        while True:
            if time.monotonic() > deadline:
                unacked.extend(keys)
                break
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    statuses[str(response.status)] += 1
                    acked.extend(keys)
                    break
            except urllib.error.HTTPError as error:
                statuses[str(error.code)] += 1
                if error.code < 500:
                    raise SystemExit(f"refused: {error.code} {error.read()[:300]!r}") from None
            except OSError:
                statuses["error"] += 1
            time.sleep(0.05)
    return {"acked": acked, "unacked": unacked, "statuses": dict(statuses)}


if __name__ == "__main__":
    base, key, session, writer, batches, size, deadline = sys.argv[1:8]
    result = main(base, key, session, writer, int(batches), int(size), float(deadline))
    print(json.dumps(result))
