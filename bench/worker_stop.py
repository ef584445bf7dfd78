"""How long scripts/run's Celery worker (with beat, on the filesystem broker) takes to exit
after SIGTERM: the worker as scripts/run starts it now, against the baseline measured in the same
run: Celery's defaults as it was started before (prefork pool of 2, heartbeat, gossip and mingle
on, kombu's stock filesystem transport and Celery's stock timer; bench/_stock_celery.py).

    python bench/worker_stop.py [ROUNDS] [--db switchboard_bench_worker_stop]
    python bench/worker_stop.py --smoke   # one round, 0.5 s settle

Each round starts both (one after the other), waits until the worker is ready plus 3 s,
sends SIGTERM and times until the process has exited. Prints each figure, the medians and their
ratio; asserts nothing. The workers (and their beat) use a scratch database, recreated and
migrated here on DATABASE_URL's server, and a temporary broker folder; REDIS_URL is ignored
(unset for the workers). Run it from the repository root with the project's virtualenv.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

NOW = [
    "-A",
    "config",
    "worker",
    "-B",
    "--pool",
    "threads",
    "--concurrency",
    "2",
    "--without-heartbeat",
    "--without-gossip",
    "--without-mingle",
]
BEFORE = ["-A", "bench._stock_celery", "worker", "-B", "--concurrency", "2"]


def stop_seconds(args: list[str], broker: str, settle: float) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT), CELERY_FILESYSTEM_BROKER_DIR=broker, DEBUG="true")
    env.pop("REDIS_URL", None)
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", *args, "--loglevel", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while " ready." not in Path(log.name).read_text():
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(Path(log.name).read_text()[-2000:])
            time.sleep(0.1)
        time.sleep(settle)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after ready")
    parser.add_argument("--db", default=common.scratch_name("switchboard_bench_worker_stop"))
    common.add_smoke_flag(parser)
    args = parser.parse_args()
    common.smoke(args, rounds=1, settle=0.5)
    os.environ["DATABASE_URL"] = common.pg_url(args.db)
    common.scratch_database(args.db)
    before, now = [], []
    with tempfile.TemporaryDirectory() as broker:
        for index in range(args.rounds):
            before.append(stop_seconds(BEFORE, broker, args.settle))
            now.append(stop_seconds(NOW, broker, args.settle))
            print(f"round {index + 1}: before {before[-1]:.2f} s, now {now[-1]:.2f} s", flush=True)
    b, n = statistics.median(before), statistics.median(now)
    print(f"median SIGTERM -> exit: before {b:.2f} s, now {n:.2f} s, ratio {b / n:.1f}x")


if __name__ == "__main__":
    main()
