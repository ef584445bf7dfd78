"""Log records with the request (or Celery task) they belong to, as text or one JSON per line.

`RequestIdFilter` copies the current request id (set by config.middleware.RequestIdMiddleware,
or the task id inside a Celery job) onto every record; `JsonFormatter` writes a record as one JSON
object per line (LOG_FORMAT=json in config/settings.py). A contextvar, not a thread-local: under
ASGI one thread serves many requests, and asgiref copies the context into the view's thread.
"""

import contextvars
import json
import logging
import re
import uuid
from datetime import UTC, datetime
from typing import Any

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

# What we accept from a client's (or proxy's) X-Request-ID; anything else gets a fresh id, so a
# header cannot inject newlines, quotes or megabytes into every log line.
_SANE_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")


def accept_or_make(raw: str | None) -> str:
    if raw and _SANE_ID.fullmatch(raw):
        return raw
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        # Django logs a 4xx/5xx answer ("Not Found: /x") after the middleware has returned, so
        # the contextvar is cleared by then; that record carries the request, which has its id.
        request = getattr(record, "request", None)
        record.request_id = request_id.get() or getattr(request, "request_id", None) or "-"
        return True


# Attributes every LogRecord has; anything else on a record came from `extra=` and is kept.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "taskName",
    "request",  # django.request's HttpRequest: not JSON, and its id is logged already
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid and rid != "-":
            entry["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


# --- Celery: the task id is the request id of everything a job logs ---------------------------
_task_tokens: dict[str, contextvars.Token[str | None]] = {}


def task_started(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _task_tokens[task_id] = request_id.set(task_id)


def task_finished(task_id: str | None = None, **_: Any) -> None:
    token = _task_tokens.pop(task_id or "", None)
    if token is not None:
        try:
            request_id.reset(token)
        except ValueError:  # set in another context (a thread pool): just clear it
            request_id.set(None)
