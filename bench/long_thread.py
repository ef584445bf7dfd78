#!/usr/bin/env python
"""A 5,000-turn agent thread that re-sends its whole message list at every checkpoint, as a
LangGraph thread does: stored inline (the baseline) and through blobs, in one run.

    .venv/bin/python bench/long_thread.py                 # ~3 min
    .venv/bin/python bench/long_thread.py --turns 1000    # quicker

One server (uvicorn on config.asgi, as bench/ingest.py starts it, on a scratch database
recreated and migrated here), the sync switchboard_client.Client. Each turn adds a user message
(~200 bytes) and an assistant reply (~600 bytes) to the thread's list, then checkpoints:

- `inline`: the whole list in one event (what a saver without blobs must do). Stops at the first
  refusal, which is the event size limit (413 payload_too_large) a few hundred turns in.
- `langgraph`: the same thread through switchboard_client.langgraph.SwitchboardSaver, put as a
  graph's loop puts checkpoints (the messages channel a new version each turn).
- `blobs`: each message a blob (client.store_blobs sends only the new ones); the list of their
  names (32 bytes each) stored as a value in 4 KiB pieces (client.store_value: a list grown at
  its end re-sends its last piece); the checkpoint event names those pieces. Every 500 turns
  the newest checkpoint is read back whole as a fresh process would (a new Client: no names
  remembered) and compared with the list.

Printed per variant: turns done, requests and bytes sent per turn, p50/p95 latency of a turn
(ms) over the first and the last 100 turns, the client's CPU per turn (µs) and the server's and
PostgreSQL backends' CPU per request (ms), and the bytes the database holds for the thread
(events' content plus blobs' data, as stored: TOAST-compressed). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as ib  # noqa: E402

ROOT = ib.ROOT
NAMES_PIECE = 4 * 1024  # bytes of the names list per piece: 128 names


def message(rng: random.Random, role: str, turn: int, size: int) -> bytes:
    words = " ".join(rng.choice(WORDS) for _ in range(size // 6))
    body = {"type": role, "id": f"{role}-{turn}", "content": words[:size]}
    return json.dumps(body, separators=(",", ":")).encode()


WORDS = [
    *[
        "the",
        "order",
        "refund",
        "shipping",
        "invoice",
        "customer",
        "account",
        "password",
        "reset",
        "delivery",
        "tracking",
    ],
    *[
        "address",
        "payment",
        "card",
        "declined",
        "support",
        "ticket",
        "escalate",
        "manager",
        "policy",
        "return",
        "window",
    ],
]


class Counted:
    """Wraps a Client's sending to count requests and request bytes."""

    def __init__(self, client: Any) -> None:
        self.requests = 0
        self.bytes = 0
        send = client._send

        def counting(request: Any, **options: Any) -> Any:
            self.requests += 1
            self.bytes += len(request.content or b"")
            return send(request, **options)

        client._send = counting


def stored_bytes(conn: Any, session_id: str) -> tuple[int, int]:
    events = conn.execute(
        "SELECT coalesce(sum(pg_column_size(content)), 0) FROM sessions_app_event"
        " WHERE session_id = %s",
        (session_id,),
    ).fetchone()[0]
    blobs = conn.execute(
        "SELECT coalesce(sum(pg_column_size(data)), 0) FROM sessions_app_blob"
        " WHERE session_id = %s",
        (session_id,),
    ).fetchone()[0]
    conn.commit()
    return int(events), int(blobs)


def run_variant(name: str, sb: Any, fresh_client: Any, turns: int, seed: int) -> dict[str, Any]:
    from switchboard_client import SwitchboardError

    rng = random.Random(seed)
    session = sb.open_session("long-thread", title=f"{turns} turns, {name}")
    counted = Counted(sb)
    messages: list[bytes] = []
    latencies: list[float] = []
    stopped = ""
    checks = 0
    cpu0 = time.process_time()
    for turn in range(1, turns + 1):
        messages.append(message(rng, "human", turn, 200))
        messages.append(message(rng, "ai", turn, 600))
        t0 = time.perf_counter()
        try:
            if name == "inline":
                values = [json.loads(m) for m in messages]
                content = {"turn": turn, "messages": values}
            else:
                names = sb.store_blobs(session.id, messages)
                pieces = sb.store_value(
                    session.id, b"".join(bytes.fromhex(n) for n in names), piece_size=NAMES_PIECE
                )
                content = {"turn": turn, "messages": {"count": len(names), "pieces": pieces}}
            sb.append(session.id, [{"kind": "note", "content": content}])
        except SwitchboardError as error:
            stopped = f"turn {turn}: {error}"
            break
        latencies.append((time.perf_counter() - t0) * 1000)
        if name == "blobs" and (turn % 500 == 0 or turn == turns):
            checks += 1
            assert read_back(fresh_client(), session.id) == messages, f"turn {turn}"
    cpu = time.process_time() - cpu0
    done = len(latencies)
    return {
        "session": session.id,
        "turns": done,
        "stopped": stopped,
        "requests": counted.requests,
        "bytes_sent": counted.bytes,
        "latencies": latencies,
        "client_cpu_us_per_turn": cpu * 1e6 / max(done, 1),
        "checks": checks,
    }


def run_langgraph(sb: Any, fresh_client: Any, turns: int, seed: int) -> dict[str, Any]:
    """The same thread through switchboard_client.langgraph.SwitchboardSaver, driven as a
    graph's loop drives its checkpointer: a checkpoint per turn whose `messages` channel holds
    the whole list (LangGraph messages, the same texts as the other variants), a new version
    each turn. A fresh saver reads the newest checkpoint back every 500 turns and at the end."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base.id import uuid6
    from switchboard_client.langgraph import SwitchboardSaver

    rng = random.Random(seed)
    namespace = f"bench-{seed}-{time.time_ns()}/"
    saver = SwitchboardSaver(sb, namespace=namespace)
    counted = Counted(sb)
    config: Any = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    messages: list[Any] = []
    version = None
    latencies: list[float] = []
    checks = 0
    cpu0 = time.process_time()
    for turn in range(1, turns + 1):
        human = json.loads(message(rng, "human", turn, 200))
        ai = json.loads(message(rng, "ai", turn, 600))
        new = [
            HumanMessage(human["content"], id=human["id"]),
            AIMessage(ai["content"], id=ai["id"]),
        ]
        messages = messages + new  # a new list of the same messages, as add_messages makes
        t0 = time.perf_counter()
        version = saver.get_next_version(version, None)
        checkpoint: Any = {
            "v": 4,
            "id": str(uuid6(clock_seq=turn)),
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"messages": messages},
            "channel_versions": {"messages": version},
            "versions_seen": {"agent": {"messages": version}},
            "updated_channels": ["messages"],
        }
        metadata: Any = {"source": "loop", "step": turn, "parents": {}}
        config = saver.put(config, checkpoint, metadata, {"messages": version})
        latencies.append((time.perf_counter() - t0) * 1000)
        if turn % 500 == 0 or turn == turns:
            checks += 1
            with fresh_client() as client:
                fresh = SwitchboardSaver(client, namespace=namespace)
                latest = fresh.get_tuple({"configurable": {"thread_id": "long"}})
            assert latest is not None
            assert latest.checkpoint["channel_values"]["messages"] == messages, f"turn {turn}"
    cpu = time.process_time() - cpu0
    session = sb.find_session(namespace + "long")
    return {
        "session": session.id,
        "turns": len(latencies),
        "stopped": "",
        "requests": counted.requests,
        "bytes_sent": counted.bytes,
        "latencies": latencies,
        "client_cpu_us_per_turn": cpu * 1e6 / max(len(latencies), 1),
        "checks": checks,
    }


def read_back(client: Any, session_id: str) -> list[bytes]:
    """The newest checkpoint's message list, as a process that remembers nothing reads it."""
    with client:
        (event,) = client.events(session_id, order="desc", limit=1).events
        ref = event.content["messages"]
        names_raw = client.load_value(session_id, ref["pieces"])
        names = [names_raw[i : i + 32].hex() for i in range(0, len(names_raw), 32)]
        assert len(names) == ref["count"]
        return client.load_blobs(session_id, names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=ib.scratch_name("switchboard_bench_thread"))
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    ib.add_smoke_flag(parser)
    args = parser.parse_args()
    ib.smoke(args, turns=30)

    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    ib.log(f"recreating database {args.db} and migrating")
    _, key, server = ib.agent_server(args, "bench-thread")

    from switchboard_client import Client

    base = f"http://127.0.0.1:{server.port}"
    results: dict[str, dict[str, Any]] = {}
    conn = ib.pg_connect(args.db, autocommit=False)
    try:
        server.wait_ready(key, "/healthz")
        load = os.getloadavg()
        for variant in ("inline", "blobs", "langgraph"):
            ib.log(f"{variant}: up to {args.turns} turns")
            fresh = lambda: Client(base, key, timeout=60)  # noqa: E731
            with Client(base, key, timeout=60) as sb, ib.CpuMeter(server, conn, args.db) as meter:
                if variant == "langgraph":
                    result = run_langgraph(sb, fresh, args.turns, args.seed)
                else:
                    result = run_variant(variant, sb, fresh, args.turns, args.seed)
            result["cpu"] = meter.per_request(max(result["requests"], 1))
            result["stored"] = stored_bytes(conn, result["session"])
            results[variant] = result
        load_after = os.getloadavg()
    finally:
        conn.close()
        server.stop()

    print(
        f"\nlong thread: {server.label}; load average {load[0]:.1f} before, "
        f"{load_after[0]:.1f} after ({os.cpu_count()} cores)"
    )
    header = (
        f"{'variant':<10}{'turns':>6}{'req/turn':>9}{'KB sent/turn':>13}"
        f"{'first100 p50/p95 ms':>21}{'last100 p50/p95 ms':>20}"
        f"{'client CPU µs/turn':>19}{'server+pg CPU ms/req':>22}{'stored MB':>11}"
    )
    print(header)
    for variant, r in results.items():
        turns = max(r["turns"], 1)
        first, last = r["latencies"][:100], r["latencies"][-100:]
        stored = sum(r["stored"]) / 1e6
        print(
            f"{variant:<10}{r['turns']:>6}{r['requests'] / turns:>9.2f}"
            f"{r['bytes_sent'] / turns / 1024:>13.1f}"
            f"{statistics.median(first):>12.1f}/{ib.pct(first, 0.95):<8.1f}"
            f"{statistics.median(last):>11.1f}/{ib.pct(last, 0.95):<8.1f}"
            f"{r['client_cpu_us_per_turn']:>19.0f}"
            f"{r['cpu']['server_cpu_ms']:>13.2f}+{r['cpu']['pg_cpu_ms']:<8.2f}"
            f"{stored:>11.1f}"
        )
        if r["stopped"]:
            print(f"{'':<10}stopped at {r['stopped']}")
    blobs = results["blobs"]
    for variant in ("blobs", "langgraph"):
        r = results[variant]
        print(
            f"{variant}: the newest checkpoint read back whole by a fresh client {r['checks']} "
            f"times (every 500 turns and the last); events {r['stored'][0] / 1e6:.1f} MB, "
            f"blobs {r['stored'][1] / 1e6:.1f} MB"
        )
    inline = results["inline"]
    if inline["turns"]:
        per_turn = {v: sum(r["stored"]) / max(r["turns"], 1) / 1024 for v, r in results.items()}
        print(
            f"stored per turn: inline {per_turn['inline']:.1f} KB over its {inline['turns']} "
            f"turns, blobs {per_turn['blobs']:.1f} KB over {blobs['turns']}, langgraph "
            f"{per_turn['langgraph']:.1f} KB over {results['langgraph']['turns']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
