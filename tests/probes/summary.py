"""The probes' counts: printed by each probe, kept for the end-of-run summary, and written to
test-artifacts/probe-counts.json (read a run's counts off it, or off `pytest -s`)."""

import json
from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"
COUNTS_FILE = ARTIFACTS / "probe-counts.json"

# name -> counts, in the order the probes reported them in this run.
REPORTED: dict[str, dict[str, int]] = {}


def report(name: str, **counts: int) -> None:
    REPORTED[name] = dict(counts)
    line = " ".join(f"{k}={v}" for k, v in counts.items())
    print(f"\nprobe: {name} {line}")
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        saved = json.loads(COUNTS_FILE.read_text())
    except (OSError, ValueError):
        saved = {}
    saved[name] = counts
    COUNTS_FILE.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")


def summary_lines() -> list[str]:
    return [
        f"{name}: " + ", ".join(f"{k}={v}" for k, v in counts.items())
        for name, counts in REPORTED.items()
    ]
