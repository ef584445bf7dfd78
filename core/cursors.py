"""Keyset cursors: one codec for every list (sessions, tasks, history, handoffs, retention
runs and holds), and the newest-first page they serve.

A cursor is the (sort value, id) of the last row shown, and optionally the name of the order it
was issued for, base64-encoded JSON: opaque to clients, checked on the way back in. A forged or
foreign cursor is refused with a 422, never passed on to the database. Ids are UUIDs, or with
`integer_id` positive bigints (the rows whose primary key is a serial).
"""

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any

from django.db.models import Model, Q, QuerySet

from .errors import InvalidInput

MAX_BIGINT = 2**63 - 1


def encode_cursor(value: datetime, object_id: object, order: str | None = None) -> str:
    """A cursor after the row (value, object_id) of a list in `order` (None: the default)."""
    parts = [value.isoformat(), str(object_id)]
    if order is not None:
        parts.append(order)
    raw = json.dumps(parts).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _integer(value: Any) -> str:
    text = str(value)
    if not text.isascii() or not text.isdigit() or not 0 < int(text) <= MAX_BIGINT:
        raise ValueError(text)
    return str(int(text))


def decode_cursor(
    cursor: str, order: str | None = None, *, integer_id: bool = False
) -> tuple[datetime, str]:
    """(value, id) of a cursor issued for `order`; InvalidInput for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        decoded = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(decoded, list) or len(decoded) not in (2, 3):
            raise ValueError
        issued_for = decoded[2] if len(decoded) == 3 else None
        # Both parts are compared in SQL: a forged id must fail here, not in the database.
        value = datetime.fromisoformat(decoded[0])
        object_id = _integer(decoded[1]) if integer_id else str(uuid.UUID(str(decoded[1])))
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise InvalidInput("The cursor is not one this server issued.") from None
    if issued_for != order:
        raise InvalidInput(
            "The cursor belongs to another sort order; start again from the first page.",
            detail={"sort": order},
        )
    return value, object_id


def newest_first_page[M: Model](
    qs: QuerySet[M], *, field: str, cursor: str | None, limit: int, order: str
) -> tuple[list[M], str | None]:
    """One page of `qs` newest first on (`field`, id), a serial id, and the cursor to the next
    page (None on the last): the lists whose rows are numbered (retention runs, holds). The
    caller bounds `limit`; `order` names the list, so one list's cursor is refused by another."""
    if cursor:
        value, object_id = decode_cursor(cursor, order, integer_id=True)
        qs = qs.filter(Q(**{f"{field}__lt": value}) | Q(**{field: value, "pk__lt": object_id}))
    page = list(qs.order_by(f"-{field}", "-pk")[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    return page, encode_cursor(getattr(page[-1], field), page[-1].pk, order)
