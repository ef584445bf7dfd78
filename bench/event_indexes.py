#!/usr/bin/env python
"""What the events table's indexes cost PostgreSQL per batch of 100 appended events.

    .venv/bin/python bench/event_indexes.py                 # ~1 min
    .venv/bin/python bench/event_indexes.py --batches 200

bench/ingest.py compares the API's batch of 100 with raw psycopg inserting into a table with
only a primary key. This measures what separates the two on PostgreSQL's side alone: the same
100 rows (bench/ingest.py's content, searchable text as the product makes it), one transaction
per batch, inserted into scratch tables shaped like sessions_app_event with

- its primary key only (the raw baseline's table);
- every index of the product's table but the full-text one (event_text_search_session);
- every index of the product's table (the product);
- the same, with the full-text index's fastupdate off (each row straight into the GIN tree).

Tables are measured in alternating rounds (drift hits all alike); p50 and mean per batch, and
the ratio to the primary-key-only table. It also times to_tsvector over the 100 texts alone.
Drops and recreates a scratch database (default `switchboard_bench_indexes`) on
127.0.0.1:5432 (user postgres), migrated with this checkout's manage.py. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as ib  # noqa: E402

SEARCH_INDEX = "event_text_search_session"
COLUMNS = "session_id, seq, kind, tier, role, content, text, tokens, cost, actor, created_at"


def make_tables(conn: Any) -> dict[str, str]:
    """Scratch tables, each named for what it carries."""
    tables = {
        "primary key only (raw baseline)": "idx_pk",
        "all indexes but full-text": "idx_no_search",
        "all indexes (the product)": "idx_all",
        "all, full-text fastupdate off": "idx_all_slow",
    }
    for name in tables.values():
        conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute("CREATE TABLE idx_pk (LIKE sessions_app_event INCLUDING DEFAULTS)")
    conn.execute("ALTER TABLE idx_pk ADD PRIMARY KEY (session_id, seq)")
    for name in ("idx_no_search", "idx_all", "idx_all_slow"):
        conn.execute(f"CREATE TABLE {name} (LIKE sessions_app_event INCLUDING ALL)")
    search = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (SEARCH_INDEX,)
    ).fetchone()[0]
    for name in ("idx_no_search", "idx_all_slow"):
        [own] = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            (name, "%USING gin%"),
        ).fetchone()
        conn.execute(f'DROP INDEX "{own}"')
    slow = search.replace(SEARCH_INDEX, "idx_all_slow_search").replace(
        "sessions_app_event", "idx_all_slow"
    )
    conn.execute(slow.replace(" WHERE ", " WITH (fastupdate = off) WHERE "))
    return tables


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default=ib.scratch_name("switchboard_bench_indexes"))
    p.add_argument("--batches", type=int, default=80, help="batches of 100 per table")
    p.add_argument("--rounds", type=int, default=4)
    ib.add_smoke_flag(p)
    args = p.parse_args()
    ib.smoke(args, batches=3, rounds=1)

    ib.log(f"recreating database {args.db}")
    env = ib.server_env(args.db)
    ib.scratch_database(args.db, env)
    import os

    os.environ.update(env)
    import django

    django.setup()
    from psycopg.types.json import Jsonb

    from sessions_app.services.log import searchable_text

    conn = ib.pg_connect(args.db, autocommit=True)
    tables = make_tables(conn)
    factory = ib.ContentFactory(seed=7)
    rng = random.Random(3)
    events = [factory.api_event(rng, i) for i in range(100)]
    texts = [searchable_text(e["kind"], e["content"]) for e in events]

    def rows(session_id: uuid.UUID) -> list[tuple[Any, ...]]:
        return [
            (
                session_id,
                seq,
                e["kind"],
                "durable" if e["kind"] in ib.DURABLE else "transient",
                e.get("role", ""),
                Jsonb(e["content"]),
                text,
                e.get("tokens", 0),
                0,
                "bench",
                ib.dt.datetime.now(ib.dt.UTC),
            )
            for seq, (e, text) in enumerate(zip(events, texts, strict=True), start=1)
        ]

    insert = "INSERT INTO {t} (" + COLUMNS + ") VALUES (" + ", ".join(["%s"] * 11) + ")"
    times: dict[str, list[float]] = {label: [] for label in tables}
    per_round = max(1, args.batches // args.rounds)
    for r in range(args.rounds):
        order = list(tables.items()) if r % 2 == 0 else list(tables.items())[::-1]
        for label, table in order:
            for _ in range(per_round):
                batch = rows(uuid.uuid4())
                t0 = time.perf_counter()
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(insert.format(t=table), batch)
                times[label].append((time.perf_counter() - t0) * 1000)
        ib.log(f"round {r + 1}/{args.rounds} done")
    t0 = time.perf_counter()
    for _ in range(per_round):
        conn.execute(
            "SELECT count(*) FROM (SELECT to_tsvector('simple', t) FROM unnest(%s::text[]) t) x",
            (texts,),
        )
    tsvector_ms = (time.perf_counter() - t0) * 1000 / per_round

    base = statistics.median(times["primary key only (raw baseline)"])
    print("=" * 88)
    print(
        f"PostgreSQL time per batch of 100 events in one transaction ({per_round * args.rounds}"
        f" batches per table, alternating rounds); searchable text "
        f"{sum(map(len, texts)) / len(texts):.0f} chars per event on average"
    )
    print(f"{'table':<40}{'p50 ms':>10}{'mean ms':>10}{'vs raw':>10}")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:<40}{median:>10.2f}{statistics.fmean(values):>10.2f}{median / base:>9.2f}x")
    print(f"{'to_tsvector of the 100 texts alone':<40}{tsvector_ms:>10.2f}")
    for table in tables.values():
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
