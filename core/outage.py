"""Log an outage of a shared store (Redis: cache, channel layer) once, not once per request.

During an outage every request that touches the store fails the same way; a traceback per
request would bury the one line an operator needs. Each guarded use owns an `OutageLog`: the
first failure is logged as a warning, the following ones at debug level, and the first success
after them says the store is back. Per process; a race between threads costs at most a
duplicate line.
"""

import logging


class OutageLog:
    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.down = False

    def failed(self, exc: BaseException) -> None:
        if self.down:
            self.logger.debug("%s still unavailable: %r", self.what, exc)
            return
        self.down = True
        self.logger.warning("%s unavailable, carrying on without it: %r", self.what, exc)

    def succeeded(self) -> None:
        if self.down:
            self.down = False
            self.logger.warning("%s available again", self.what)
