"""The API contract's shared parts: request types that parse what the schema says, and the
response side (the one error shape, and `responses(...)` that every operation declares).

Every operation of the agent API declares its responses, so the OpenAPI document says which
statuses it answers and with which body. Endpoints on hot paths still send hand-built JSON
(core.http.json_response, or a spliced event slice); their schemas describe those bytes, and
tests/api/test_contract.py checks that they do.
"""

import math
import re
from contextvars import ContextVar
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    ModelWrapValidatorHandler,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from core.text import check_storable

# --- Requests ---------------------------------------------------------------------------------


class InSchema(Schema):
    """A request body (or part of one) or a query: validated from a JSON object, nothing else.

    ninja's Schema reads any value through attribute access (to build schemas from model
    instances), so `"budget": [null, null]` or a bare string validated as an all-defaults
    object and was accepted. A request is JSON: an object is a dict; anything else is refused.

    A field the schema does not declare is refused (422 naming it, `extra_forbidden`), never
    ignored: a misspelt `expected_head_seq` would otherwise be a write without its check.
    `extra="forbid"` also puts `additionalProperties: false` in the schema. Free-form parts
    (`content`, `metadata`, `payload`, `params`, …) are `dict[str, Any]` fields, not schemas,
    and stay free.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(  # replaces ninja's validator of that name
        cls, values: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        if not isinstance(values, dict | cls):
            raise PydanticCustomError("model_type", "Input should be an object")
        if isinstance(values, cls) or _checked_above.get():
            return handler(values)
        # The outermost schema checks the raw request once, so the error names the field as
        # the client wrote it ("events[1].content.text"); the schemas nested in it skip it.
        check_storable(values, field="", body=True)
        token = _checked_above.set(True)
        try:
            return handler(values)
        finally:
            _checked_above.reset(token)


_checked_above: ContextVar[bool] = ContextVar("_checked_above", default=False)


def _storable_text(value: str, info: ValidationInfo) -> str:
    check_storable(value, field=info.field_name or "")
    return value


# A path or query parameter declared on its own (not in an InSchema): text it can store.
# Text PostgreSQL cannot store is refused as a domain error (InvalidInput naming the field),
# not a schema error: pydantic lets InvalidInput through, and the API renders it as a 422.
StorableStr = Annotated[str, AfterValidator(_storable_text)]


# Column bounds (seqs, tokens, versions, attempts: integer; budgets, ids: bigint): a number
# beyond them is refused as 422 before the database refuses it.
MAX_INT = 2**31 - 1
MAX_BIGINT = 2**63 - 1


def _json_int(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JSON Schema: 5.0 is an integer
    return value


def json_int(**bounds: int) -> Any:
    """An integer in a JSON body: a JSON number without a fraction, not "5" or true, which
    pydantic's lax mode would turn into 5 (query parameters are strings by nature and stay
    lax). `bounds` (ge, le) go inside, where the JSON schema shows them as minimum/maximum."""
    return Annotated[int, Field(**bounds), BeforeValidator(_json_int)]


_ISO_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _iso_only(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE_RE.match(value):
        raise PydanticCustomError("datetime_format", "Input should be an ISO 8601 date-time")
    return value


def _in_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError("datetime_range", "Input is out of range") from None


# A date-time as ISO 8601 text, as the schema's `format: date-time` says (pydantic would also
# read a number or a numeric string as a Unix timestamp), brought to UTC: PostgreSQL refuses
# some offsets that RFC 3339 allows (-21:14).
IsoDateTime = Annotated[datetime, BeforeValidator(_iso_only), AfterValidator(_in_utc)]

DECIMAL_PLACES = 6
_QUANTUM = Decimal(1).scaleb(-DECIMAL_PLACES)


def decimal_in(integer_digits: int) -> Any:
    """A non-negative decimal for a column with `integer_digits` digits before the point and
    DECIMAL_PLACES after it, with a JSON schema that says exactly what is accepted.

    A string is exact, so it must fit the column as written (digits, an optional point, at
    most six decimals). A JSON number is a binary float, so it is rounded to the column's six
    places (0.1 + 0.2 is stored as 0.300000) and must lie between 0 and the column's largest
    value. Anything else (booleans, exponents or signs in strings, blanks) is refused.
    """
    pattern = rf"^[0-9]{{1,{integer_digits}}}(\.[0-9]{{1,{DECIMAL_PLACES}}})?$"
    string_re = re.compile(pattern.replace("$", r"\Z"))
    maximum = Decimal(10) ** integer_digits - _QUANTUM

    def parse(value: Any) -> Decimal:
        if isinstance(value, str):
            if not string_re.match(value):
                raise PydanticCustomError(
                    "decimal_format",
                    "Input should be a decimal string with at most {integer_digits} digits "
                    "before the point and {places} after it",
                    {"integer_digits": integer_digits, "places": DECIMAL_PLACES},
                )
            return Decimal(value)
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise PydanticCustomError("decimal_type", "Input should be a number or a string")
        if isinstance(value, float) and not math.isfinite(value):
            raise PydanticCustomError("finite_number", "Input should be a finite number")
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        if not 0 <= exact <= maximum:
            raise PydanticCustomError(
                "decimal_range", "Input should be from 0 to {maximum}", {"maximum": str(maximum)}
            )
        return abs(exact.quantize(_QUANTUM))  # abs: no "-0.000000"

    return Annotated[
        Decimal,
        PlainValidator(parse),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "number", "minimum": 0, "maximum": float(maximum)},
                    {"type": "string", "pattern": pattern},
                ],
                "description": f"A non-negative decimal: a string with at most {DECIMAL_PLACES} "
                "decimals, or a number (rounded to that many).",
            }
        ),
    ]


# --- Responses --------------------------------------------------------------------------------


class OutSchema(Schema):
    """A response body: every key always present (nullable where null is possible), no others.

    `extra="forbid"` puts `additionalProperties: false` in the schema, so a key an endpoint
    sends without declaring it is a contract violation, not a silent extension.
    """

    model_config = ConfigDict(extra="forbid")


# Decimals (costs, budgets) are sent as strings, so no client reads them through a float.
DecimalString = Annotated[
    str,
    Field(pattern=r"^[0-9]+(\.[0-9]+)?$", description="A non-negative decimal, as a string."),
]


class ErrorBody(OutSchema):
    code: str = Field(..., description="Stable, machine-readable: branch on this.")
    message: str = Field(..., description="For people; may change.")
    detail: dict[str, Any] | list[dict[str, Any]] = Field(
        ...,
        description="What went wrong, as data (an object; for invalid input, the list of "
        "problems, each with type, loc and msg).",
    )


class ErrorOut(OutSchema):
    """The one error shape, `{"error": {"code", "message", "detail"}}`: core.http's
    error_response."""

    error: ErrorBody


# Any operation may answer these: no or a bad API key (401), a parameter or body that does not
# validate (422), the key's rate limit (429), the database down (503).
COMMON_ERROR_STATUSES = (401, 422, 429, 503)
# And one that takes a body: not JSON, or a bad Content-Length (400), too large (413).
BODY_ERROR_STATUSES = (400, 413)


def responses(success: dict[int, Any], *errors: int, body: bool = False) -> dict[int, Any]:
    """An operation's `response=`: its success bodies, then ErrorOut for `errors`, for the
    statuses every operation can answer, and (`body`) for those of one that reads a body."""
    statuses = {*errors, *COMMON_ERROR_STATUSES, *(BODY_ERROR_STATUSES if body else ())}
    return {**success, **dict.fromkeys(sorted(statuses), ErrorOut)}


# The OpenAPI extension listing an operation's query parameter prefixes: parameters the client
# names itself after a declared prefix (GET /sessions' `metadata.<name>`), which no schema can
# list. config.api's check of unknown query parameters takes them; any other name is refused.
QUERY_PREFIXES = "x-query-parameter-prefixes"


def query_prefixes(*prefixes: str) -> dict[str, list[str]]:
    """`openapi_extra` of an operation that takes query parameters `<prefix><name>` (describe
    them in its description)."""
    return {QUERY_PREFIXES: list(prefixes)}
