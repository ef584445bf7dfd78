#!/usr/bin/env python
"""Artifact upload and download throughput against copying the file on disk, with the memory
the server holds meanwhile (issue 28 §1's figures).

    .venv/bin/python bench/artifacts.py                  # a 100 MB file, 3 rounds
    .venv/bin/python bench/artifacts.py --size-mb 20     # quicker

One server on a scratch database (recreated and migrated here), as production serves the API:
granian's WSGI interface on config.wsgi (bench/ingest.py's Server), its artifacts in a scratch
folder. Per round, in this order: `copy` (shutil.copyfile of the file, the baseline: what any
store must at least do), `upload` (PUT /sessions/{id}/artifacts/{name} with the file streamed
from disk by httpx), `download` (GET of it, streamed to a file). Printed: MB/s of each (median
over the rounds) and its ratio to the copy, the server's CPU per MB, and the server's resident
memory (its process tree's RSS, sampled every 20 ms) before and at its peak during each: a
server that read the file whole would grow by its size. On a shared machine the wall-clock
figures move with the others' load (printed); the RSS and CPU ones much less. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as ib  # noqa: E402

MB = 1024 * 1024


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


class PeakRss:
    """The server tree's RSS before a block and its peak during it, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> PeakRss:
        self.before = self.peak = tree_rss(self.pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, tree_rss(self.pid))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss(self.pid))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=ib.scratch_name("switchboard_bench_artifacts"))
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    ib.add_smoke_flag(parser)
    args = parser.parse_args()
    ib.smoke(args, size_mb=2, rounds=1)

    (ib.ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-artifacts-"))
    os.environ["SWITCHBOARD_ARTIFACTS_DIR"] = str(work / "store")
    os.environ["SWITCHBOARD_ARTIFACT_MAX_BYTES"] = str((args.size_mb + 1) * MB)
    ib.log(f"recreating database {args.db} and migrating")
    _, key, asgi = ib.agent_server(args, "bench-artifacts")
    asgi.stop()  # agent_server's uvicorn: this bench measures the production split's WSGI side
    server = ib.Server(
        args.db,
        ib.free_port(),
        workers=1,
        http=ib.DEFAULT_HTTP,
        loop=ib.DEFAULT_LOOP,
        kind=ib.GRANIAN_WSGI,
    )
    source = work / "source.bin"
    with open(source, "wb") as out:
        for _ in range(args.size_mb):
            out.write(os.urandom(MB))
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    size = source.stat().st_size
    figures: dict[str, list[float]] = {"copy": [], "upload": [], "download": []}
    cpu: dict[str, list[float]] = {"upload": [], "download": []}
    rss: dict[str, list[tuple[int, int]]] = {"upload": [], "download": []}
    base = f"http://127.0.0.1:{server.port}"
    try:
        server.wait_ready(key, "/healthz")
        load = os.getloadavg()
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=600
        ) as client:
            session = client.post("/api/v1/sessions", json={"agent": "bench"}).json()["id"]
            url = f"/api/v1/sessions/{session}/artifacts/big.bin"
            for round_ in range(args.rounds):
                copy = work / f"copy-{round_}.bin"
                started = time.perf_counter()
                shutil.copyfile(source, copy)
                figures["copy"].append(size / MB / (time.perf_counter() - started))
                copy.unlink()

                cpu0 = ib.tree_cpu(server.proc.pid)
                with PeakRss(server.proc.pid) as peak, open(source, "rb") as body:
                    started = time.perf_counter()
                    answer = client.put(
                        url,
                        content=body,
                        headers={
                            "Content-Type": "application/octet-stream",
                            "Content-Length": str(size),
                        },
                    )
                    elapsed = time.perf_counter() - started
                if answer.status_code != 201 or answer.json()["sha256"] != digest:
                    raise RuntimeError(f"upload: {answer.status_code} {answer.text[:300]}")
                figures["upload"].append(size / MB / elapsed)
                cpu["upload"].append((ib.tree_cpu(server.proc.pid) - cpu0) * 1000 / (size / MB))
                rss["upload"].append((peak.before, peak.peak))

                target = work / f"download-{round_}.bin"
                cpu0 = ib.tree_cpu(server.proc.pid)
                with PeakRss(server.proc.pid) as peak, open(target, "wb") as out:
                    started = time.perf_counter()
                    with client.stream("GET", url) as streamed:
                        for chunk in streamed.iter_bytes(256 * 1024):
                            out.write(chunk)
                    elapsed = time.perf_counter() - started
                figures["download"].append(size / MB / elapsed)
                cpu["download"].append((ib.tree_cpu(server.proc.pid) - cpu0) * 1000 / (size / MB))
                rss["download"].append((peak.before, peak.peak))
                if target.stat().st_size != size:
                    raise RuntimeError("download: short")
                target.unlink()
        load_after = os.getloadavg()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"\nartifacts: a {size / MB:.0f} MB file, {args.rounds} round(s), {server.label}; "
        f"load average {load[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} cores)"
    )
    copy_rate = statistics.median(figures["copy"])
    print(f"{'':<10}{'MB/s':>9}{'vs copy':>9}{'server CPU ms/MB':>18}{'server RSS MB':>22}")
    print(f"{'copy':<10}{copy_rate:>9.0f}{1:>9.2f}")
    for what in ("upload", "download"):
        rate = statistics.median(figures[what])
        before = max(b for b, _ in rss[what]) / MB
        peak = max(p for _, p in rss[what]) / MB
        print(
            f"{what:<10}{rate:>9.0f}{rate / copy_rate:>9.2f}"
            f"{statistics.median(cpu[what]):>18.2f}"
            f"{before:>12.0f} → {peak:<7.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
