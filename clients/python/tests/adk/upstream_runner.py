"""How the upstream copies (upstream/, upstream_artifacts/) run ADK's `@pytest.mark.asyncio`
tests without pytest-asyncio: each coroutine test in asyncio.run, then the clients of the
services it used closed in the same loop."""

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any


def run_coroutine_test(pyfuncitem: Any, services: Callable[[dict[str, Any]], Iterable[Any]]):
    """For a `pytest_pyfunc_call` hook: True once a coroutine test has run (None for the
    others, which pytest calls itself). `services(arguments)` names the services to close."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    async def run() -> None:
        try:
            await pyfuncitem.obj(**arguments)
        finally:
            for service in services(arguments):
                await service.client.aclose()

    asyncio.run(run())
    return True
