"""Run a function in several OS processes at once, against the test database.

`run_in_processes(fn, args_per_process)` starts one fresh interpreter per entry ('spawn', never
'fork': a forked child would share the parent's open database sockets), each running
`django.setup()` against the live test database, then `fn(*args)` once every child is ready.
It returns each child's result, in order; a child's exception fails the call with its traceback.
(Servers and Celery workers: tests/servers.py.)

`ProcessPool(count)` keeps such children alive for several runs, so a module of races pays the
interpreter start-up (about two seconds of CPU per child) once: `pool.run(fn, args_per_process)`
has the same contract as `run_in_processes`, and each run's children close their database
connections when it ends.

`run_behind_lock(pool, fn, args, hold=..., inserting_into=...)` makes a race certain, not likely:
`hold()` writes (say, the row a unique constraint guards) in a transaction left open on the test's
connection, the children run, and the transaction commits only once every child waits on a lock
it holds (pg_stat_activity), so each child's work starts before those rows are visible and ends
after they are.

The test database is only visible to other processes once rows are committed: use pytest-django's
`transactional_db` in tests that call this.
"""

import contextlib
import importlib
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Empty
from typing import Any

import psycopg
from django.db import connection, transaction
from django.db.models import Model

# Set in each child: the barrier every child of the run waits on (see `barrier()`).
_barrier: Any = None


def barrier() -> Any:
    """The run's barrier, for functions that need more rendezvous than the start."""
    if _barrier is None:
        raise RuntimeError("barrier() is only available inside run_in_processes()")
    return _barrier


def child_db_env() -> dict[str, str]:
    """Environment that points a child process (tests.settings) at the live test database."""
    return {
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SWITCHBOARD_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
    }


def _dotted(fn: Callable[..., Any]) -> str:
    module, name = fn.__module__, fn.__qualname__
    if module == "__main__" or "<locals>" in name:
        raise ValueError(f"{fn!r} must be a module-level function so a child can import it")
    return f"{module}:{name}"


def _child(index: int, env: dict[str, str], start: Any, inbox: Any, out: Any) -> None:
    """A pool child: set Django up once, then run each job it is sent until it gets None."""
    global _barrier
    try:
        os.environ.update(env)
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # children run as production does
        import django

        django.setup()
        _barrier = start
    except BaseException:  # noqa: BLE001 - everything goes back to the parent
        start.abort()  # the others would wait for this one at every run
        out.put((None, index, False, traceback.format_exc()))
        return
    from django.db import connections

    while (job := inbox.get()) is not None:
        run, target, args = job
        try:
            module, _, name = target.partition(":")
            fn = getattr(importlib.import_module(module), name)
            start.wait()
            result = fn(*args)
            # Work this process deferred past its responses (automatic snapshots) is done
            # before it reports, as a server process finishes it before its next idle moment.
            snapshots = sys.modules.get("sessions_app.services.snapshots")
            if snapshots is not None and not snapshots.drain():
                raise TimeoutError("background snapshots still waiting after 30 s")
            out.put((run, index, True, result))
        except BaseException:  # noqa: BLE001 - everything goes back to the parent
            # Release the others from the barrier now rather than at its timeout.
            start.abort()
            out.put((run, index, False, traceback.format_exc()))
        finally:
            with contextlib.suppress(Exception):
                connections.close_all()


class ProcessPool:
    """`count` spawned children, reused by every `run`; a context manager that stops them."""

    def __init__(
        self, count: int, *, env: dict[str, str] | None = None, timeout: float = 90
    ) -> None:
        self.count = count
        self.timeout = timeout
        self._env = {**child_db_env(), **(env or {})}
        self._ctx = multiprocessing.get_context("spawn")
        self._processes: list[Any] = []
        self._runs = 0

    def __enter__(self) -> "ProcessPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        ctx = self._ctx
        self._start_barrier = ctx.Barrier(self.count, timeout=self.timeout)
        self._out = ctx.Queue()
        self._inboxes = [ctx.Queue() for _ in range(self.count)]
        self._processes = [
            ctx.Process(
                target=_child,
                args=(i, self._env, self._start_barrier, inbox, self._out),
                daemon=True,
            )
            for i, inbox in enumerate(self._inboxes)
        ]
        for process in self._processes:
            process.start()

    def run(
        self,
        fn: Callable[..., Any],
        args_per_process: Sequence[tuple[Any, ...]],
        *,
        timeout: float | None = None,
    ) -> list[Any]:
        """Run `fn(*args)` in every child, one entry each; all start together (a barrier).

        `fn` must be importable (module level) and its arguments and result picklable. Django
        model instances are not passed: pass ids and load them in the child.
        """
        if len(args_per_process) != self.count:
            raise ValueError(
                f"this pool runs {self.count} processes at once, not {len(args_per_process)}"
            )
        target = _dotted(fn)
        if not self._processes:
            self._start()
        elif self._start_barrier.broken:
            self._start_barrier.reset()  # a child failed the last run; all of them are idle
        self._runs += 1
        run = self._runs
        for inbox, args in zip(self._inboxes, args_per_process, strict=True):
            inbox.put((run, target, tuple(args)))
        timeout = self.timeout if timeout is None else timeout
        results: dict[int, Any] = {}
        failures: list[str] = []
        deadline = time.monotonic() + timeout
        ok_to_reuse = False
        try:
            while len(results) + len(failures) < self.count:
                try:
                    got, index, ok, value = self._out.get(
                        timeout=max(0.1, deadline - time.monotonic())
                    )
                except Empty:
                    alive = [p.pid for p in self._processes if p.is_alive()]
                    raise TimeoutError(
                        f"{self.count - len(results) - len(failures)} of {self.count} processes "
                        f"gave no result within {timeout}s (still alive: {alive})"
                    ) from None
                if got is None:  # the child could not even start: nothing to reuse
                    failures.append(f"process {index} failed to start:\n{value}")
                    break
                if got != run:
                    continue
                if ok:
                    results[index] = value
                else:
                    failures.append(f"process {index} failed:\n{value}")
            else:
                ok_to_reuse = True
        finally:
            if not ok_to_reuse:
                self.close()
        if failures:
            raise AssertionError("\n".join(failures))
        return [results[i] for i in range(self.count)]

    def close(self) -> None:
        if not self._processes:
            return
        for inbox in self._inboxes:
            inbox.put(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        self._processes = []


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
    with ProcessPool(len(args_per_process), env=env, timeout=timeout) as pool:
        return pool.run(fn, args_per_process)


def post_each_at_once(raw_key: str, path: str, bodies: list[dict[str, Any]]) -> list[Any]:
    """In a child process: for each body, wait for the others (the barrier), then POST it to the
    API's `path` with this key; returns (status, JSON answer) for each."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    answers = []
    for body in bodies:
        barrier().wait()
        response = client.post(path, body)
        answers.append((response.status_code, response.json()))
    return answers


def post_in_rounds(
    pool: ProcessPool, raw_key: str, path: str, bodies: list[dict[str, Any]]
) -> list[list[Any]]:
    """A round per body: every process of `pool` POSTs it at the same moment (post_each_at_once).
    Returns each round's answers, (status, JSON answer) from each process."""
    per_process = pool.run(post_each_at_once, [(raw_key, path, bodies)] * pool.count)
    return [list(answers) for answers in zip(*per_process, strict=True)]


def run_behind_lock[T](
    pool: ProcessPool,
    fn: Callable[..., Any],
    args_per_process: Sequence[tuple[Any, ...]],
    *,
    hold: Callable[[], T],
    inserting_into: type[Model],
    timeout: float = 30,
) -> tuple[T, list[Any]]:
    """Run `hold()` in a transaction on this test's connection, then `pool.run(fn, …)`; commit
    once all of the pool's processes wait on a lock that transaction holds, each in an INSERT into
    `inserting_into`'s table. Returns what `hold()` returned and the processes' results.

    Fails (after rolling back and letting the processes finish) if they do not all wait there
    within `timeout` seconds, or if they finish first: then the test would not test what it says.
    """
    with ThreadPoolExecutor(1) as executor:
        with transaction.atomic():
            held = hold()
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                (holder,) = cursor.fetchone()
            running = executor.submit(pool.run, fn, args_per_process)
            _wait_until_blocked(holder, inserting_into, pool.count, running, timeout)
        return held, running.result()


def _wait_until_blocked(
    holder: int, model: type[Model], count: int, running: Future[Any], timeout: float
) -> None:
    """Until `count` backends wait on a lock held by the backend `holder`, each inserting into
    `model`'s table (seen from a connection of its own: a transaction sees pg_stat_activity as of
    its first look)."""
    params = connection.get_connection_params()
    deadline = time.monotonic() + timeout
    with psycopg.connect(**params, autocommit=True) as watcher:
        while True:
            statements = [
                query
                for (query,) in watcher.execute(
                    "SELECT query FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))",
                    (holder,),
                )
            ]
            inserting = [
                q for q in statements if q.startswith(f'INSERT INTO "{model._meta.db_table}"')
            ]
            if len(inserting) == count:
                return
            if running.done():
                raise AssertionError(
                    f"the processes finished while {len(inserting)} of {count} waited on the lock: "
                    f"{running.result()!r}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"after {timeout}s, {len(inserting)} of {count} processes waited on the lock"
                    f" inserting into {model._meta.db_table}; waiting on it: "
                    f"{[q[:80] for q in statements]}"
                )
            time.sleep(0.02)
