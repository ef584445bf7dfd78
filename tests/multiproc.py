"""Run a function in several OS processes at once, against the test database.

`run_in_processes(fn, args_per_process)` starts one fresh interpreter per entry ('spawn', never
'fork': a forked child would share the parent's open database sockets), each running
`django.setup()` against the live test database, then `fn(*args)` once every child is ready.
It returns each child's result, in order; a child's exception fails the call with its traceback.
(Servers and Celery workers: tests/servers.py.)

The test database is only visible to other processes once rows are committed: use pytest-django's
`transactional_db` in tests that call this.
"""

import importlib
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from queue import Empty
from typing import Any

from django.db import connection

# Set in each child: the barrier every child of the run waits on (see `barrier()`).
_barrier: Any = None


def barrier() -> Any:
    """The run's barrier, for functions that need more rendezvous than the start."""
    if _barrier is None:
        raise RuntimeError("barrier() is only available inside run_in_processes()")
    return _barrier


def child_db_env() -> dict[str, str]:
    """Environment that points a child process (tests.settings) at the live test database."""
    settings = connection.settings_dict
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings"}
    if connection.vendor == "sqlite":
        env["SWITCHBOARD_TEST_EMBEDDED"] = "1"
        env["SQLITE_PATH"] = str(settings["NAME"])
    else:
        env["SWITCHBOARD_TEST_DB_NAME"] = str(settings["NAME"])
    return env


def _dotted(fn: Callable[..., Any]) -> str:
    module, name = fn.__module__, fn.__qualname__
    if module == "__main__" or "<locals>" in name:
        raise ValueError(f"{fn!r} must be a module-level function so a child can import it")
    return f"{module}:{name}"


def _child(
    target: str, index: int, args: tuple[Any, ...], env: dict[str, str], start: Any, out: Any
) -> None:
    global _barrier
    try:
        os.environ.update(env)
        import django

        django.setup()
        module, _, name = target.partition(":")
        fn = getattr(importlib.import_module(module), name)
        _barrier = start
        start.wait()
        result = fn(*args)
        out.put((index, True, result))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent
        # Release the others from the barrier now rather than at its timeout.
        start.abort()
        out.put((index, False, traceback.format_exc()))
    finally:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001
            pass


def run_in_processes(
    fn: Callable[..., Any],
    args_per_process: Sequence[tuple[Any, ...]],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 90,
) -> list[Any]:
    """Run `fn(*args)` in one spawned process per entry; all start together (a barrier).

    `fn` must be importable (module level) and its arguments and result picklable. Django model
    instances are not passed: pass ids and load them in the child. `env` adds environment
    variables (settings read from the environment, e.g. SWITCHBOARD_SNAPSHOT_EVERY).
    """
    ctx = multiprocessing.get_context("spawn")
    count = len(args_per_process)
    start = ctx.Barrier(count, timeout=timeout)
    out = ctx.Queue()
    env = {**child_db_env(), **(env or {})}
    target = _dotted(fn)
    processes = [
        ctx.Process(target=_child, args=(target, i, tuple(args), env, start, out), daemon=True)
        for i, args in enumerate(args_per_process)
    ]
    for process in processes:
        process.start()
    results: dict[int, Any] = {}
    failures: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(results) + len(failures) < count:
            try:
                index, ok, value = out.get(timeout=max(0.1, deadline - time.monotonic()))
            except Empty:
                alive = [p.pid for p in processes if p.is_alive()]
                raise TimeoutError(
                    f"{count - len(results) - len(failures)} of {count} processes gave no result "
                    f"within {timeout}s (still alive: {alive})"
                ) from None
            if ok:
                results[index] = value
            else:
                failures.append(f"process {index} failed:\n{value}")
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
    if failures:
        raise AssertionError("\n".join(failures))
    return [results[i] for i in range(count)]
