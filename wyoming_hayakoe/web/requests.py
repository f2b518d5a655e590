"""What a page request may carry: its JSON body, checked field by field, and the errors that answer it."""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

from aiohttp import web

from ..engine.settings import BOUNDS
from ..server.requests import Codes, RequestError
from .dictionary import EntryProblem, RawEntry

#: HTTP status of each error code (server/requests.py Codes).
STATUS = {
    Codes.BAD_REQUEST: 400,
    Codes.EMPTY_TEXT: 400,
    Codes.INVALID_VOICE_NAME: 400,
    Codes.UNKNOWN_VOICE: 404,
    Codes.UNKNOWN_STYLE: 404,
    Codes.TEXT_TOO_LONG: 413,
    Codes.UNPRONOUNCEABLE: 422,
    Codes.BUSY: 503,
    Codes.SHUTTING_DOWN: 503,
    Codes.INTERNAL: 500,
}
FORBIDDEN = "forbidden"
NOT_FOUND = "not-found"
NO_DICTIONARY = "no-dictionary"
BAD_DICTIONARY = "bad-dictionary"
STATUS.update({FORBIDDEN: 403, NOT_FOUND: 404, NO_DICTIONARY: 409, BAD_DICTIONARY: 409})

#: Most entries a dictionary saved from the page may have.
MAX_ENTRIES = 5000
_ENTRY_FIELDS = ("surface", "reading", "accent", "priority")


def json_response(body: Any, status: int = 200) -> web.Response:
    """`body` as JSON, Japanese left as it is (not as \\u escapes)."""
    return web.json_response(body, status=status, dumps=partial(json.dumps, ensure_ascii=False))


class ApiError(Exception):
    """A request answered with `{"error": {"code", "message", "field"}}`."""

    def __init__(self, code: str, message: str, field: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status = status or STATUS.get(code, 400)

    @classmethod
    def of(cls, error: RequestError, field: str | None = None) -> ApiError:
        return cls(error.code, error.text, field)

    def response(self) -> web.Response:
        body = {"error": {"code": self.code, "message": self.message, "field": self.field}}
        return json_response(body, status=self.status)


class EntryErrors(Exception):
    """Entries the file format does not accept: 422 `{"errors": [{"index", "field", "message"}]}`."""

    def __init__(self, problems: list[EntryProblem]) -> None:
        super().__init__(f"{len(problems)} problem(s)")
        self.problems = problems

    def response(self) -> web.Response:
        errors = [{"index": p.index, "field": p.field, "message": p.message} for p in self.problems]
        return json_response({"errors": errors}, status=422)


async def json_object(request: web.Request, allowed: tuple[str, ...], too_large: str = Codes.BAD_REQUEST) -> dict:
    """The request's JSON object; ApiError if it is not one, too large, or has fields not in `allowed`."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(too_large, f"The request is larger than {request.client_max_size} bytes") from None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deeply, a number too long
        raise ApiError(Codes.BAD_REQUEST, "The body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(Codes.BAD_REQUEST, "The body must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ApiError(Codes.BAD_REQUEST, f"Unknown field {unknown[0]!r}; expected {', '.join(allowed)}", unknown[0])
    return body


def optional_string(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError(Codes.BAD_REQUEST, f"{name!r} must be a string", name)
    return value or None


def text_of(body: dict, name: str = "text") -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise ApiError(Codes.BAD_REQUEST, f"{name!r} must be a string", name)
    if not value.strip():
        raise ApiError(Codes.EMPTY_TEXT, "Text is empty: nothing to say", name)
    return value


def settings_of(body: dict) -> dict[str, Any]:
    """The synthesis settings a body sets, each a finite number within its BOUNDS."""
    found: dict[str, Any] = {}
    for name, (low, high) in BOUNDS.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ApiError(Codes.BAD_REQUEST, f"{name!r} must be a number from {low} to {high}", name)
        if not low <= value <= high:
            raise ApiError(Codes.BAD_REQUEST, f"{name!r} must be from {low} to {high}, got {value}", name)
        found[name] = float(value)
    return found


def raw_entry(value: Any, index: int, problems: list[EntryProblem]) -> RawEntry | None:
    """One entry of a body as text fields; its type problems are added to `problems`."""
    if not isinstance(value, dict):
        problems.append(EntryProblem(index, "surface", "an entry must be an object with surface and reading"))
        return None
    before = len(problems)
    for name in sorted(set(value) - set(_ENTRY_FIELDS)):
        problems.append(EntryProblem(index, "surface", f"unknown field {name!r}"))
    fields: dict[str, str] = {}
    for name in _ENTRY_FIELDS:
        item = value.get(name)
        if name in ("surface", "reading"):
            if not isinstance(item, str):
                problems.append(EntryProblem(index, name, f"the {name} must be a string"))
                continue
            fields[name] = item
        elif item is None:
            fields[name] = ""
        elif isinstance(item, bool) or not isinstance(item, int):
            problems.append(EntryProblem(index, name, f"the {name} must be a whole number or null"))
        else:
            fields[name] = str(item)
    if len(problems) > before:
        return None
    return RawEntry(**fields)


def raw_entries(value: Any) -> tuple[list[RawEntry | None], list[EntryProblem]]:
    """The `entries` list of a body (None where an entry has the wrong shape) and those shape problems."""
    if not isinstance(value, list):
        raise ApiError(Codes.BAD_REQUEST, "'entries' must be a list", "entries")
    if len(value) > MAX_ENTRIES:
        raise ApiError(Codes.BAD_REQUEST, f"At most {MAX_ENTRIES} entries, got {len(value)}", "entries")
    problems: list[EntryProblem] = []
    return [raw_entry(item, index, problems) for index, item in enumerate(value)], problems
