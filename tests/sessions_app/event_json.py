"""The API's event JSON written out in Python, from a loaded slice row: what the database's
lines (sessions_app.storage._EVENT_LINE, sent by the slice and the export) must equal byte for
byte: `json.dumps(..., separators=(",", ":"), ensure_ascii=False)` of the event's fields, its
stored content spliced in, its timestamp as `datetime.isoformat()` writes it."""

from json.encoder import encode_basestring as json_str  # json.dumps(str, ensure_ascii=False)
from typing import Any


def event_row_to_json(row: dict[str, Any]) -> str:
    key = row["idempotency_key"]
    return (
        f'{{"seq":{row["seq"]},"kind":{json_str(row["kind"])},"tier":{json_str(row["tier"])},'
        f'"role":{json_str(row["role"])},"tokens":{row["tokens"]},"cost":"{row["cost"]}",'
        f'"actor":{json_str(row["actor"])},'
        f'"idempotency_key":{"null" if key is None else json_str(key)},'
        f'"created_at":"{row["created_at"].isoformat()}","session_id":"{row["session_id"]}",'
        f'"content":{row["content_json"]}}}'
    )
