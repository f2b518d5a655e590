"""Reading Wyoming events defensively.

`wyoming.event.async_read_event` drops the connection silently on anything
unexpected (a bad header line, a header over 64 KiB, data that is not a JSON
object) and reads data blocks of any size into memory. This reader instead
returns a `BadEvent` describing the problem, stays in step with the stream
whenever the framing allows it, and never buffers more than `max_data_bytes`
of one event: larger data blocks and payloads are read and thrown away, so
a huge text is answered with an error and the connection keeps working.
JSON that Python's parser refuses to finish (nesting too deep for its
recursion limit, integers beyond its digit limit) is a `BadEvent` too.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from wyoming.event import Event

_NEWLINE = b"\n"
_DISCARD_STEP = 1 << 16


@dataclass(frozen=True)
class BadEvent:
    """Input that could not be read as an event; `type` is known when the header was fine."""

    code: str
    text: str
    type: str | None = None


async def _discard(reader: asyncio.StreamReader, count: int) -> None:
    while count > 0:
        step = min(count, _DISCARD_STEP)
        await reader.readexactly(step)
        count -= step


async def _read_line(reader: asyncio.StreamReader) -> bytes | None:
    """One line; b"" at EOF, None when it was longer than the stream's limit (skipped)."""
    try:
        return await reader.readuntil(_NEWLINE)
    except asyncio.IncompleteReadError as err:
        return err.partial  # EOF; a last line without newline is still a line
    except asyncio.LimitOverrunError as err:
        consumed = err.consumed
    while True:  # skip the rest of the over-long line
        await _discard(reader, consumed)
        try:
            await reader.readuntil(_NEWLINE)
            return None
        except asyncio.LimitOverrunError as err:
            consumed = err.consumed


def _loads(raw: bytes) -> object:
    """`json.loads`, with every way it fails on hostile input raised as ValueError saying why."""
    try:
        return json.loads(raw)
    except RecursionError:  # e.g. 60,000 "[": the C scanner gives up cleanly
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    except json.JSONDecodeError:
        raise ValueError("not valid JSON") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise ValueError("a number has too many digits") from None


def _length(header: dict, key: str) -> int | None:
    value = header.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


async def read_event(
    reader: asyncio.StreamReader, max_data_bytes: int, max_payload_bytes: int
) -> Event | BadEvent | None:
    """The next event, a BadEvent, or None at end of stream."""
    try:
        while True:
            line = await _read_line(reader)
            if line is None:
                return BadEvent("bad-request", "Event header line too long (put large data in the data block)")
            if not line:
                return None
            if line.strip():
                break  # blank lines between events are tolerated
        try:
            header = _loads(line)
        except ValueError as err:
            return BadEvent("bad-request", f"Event header is not usable JSON ({err})")
        if not isinstance(header, dict):
            return BadEvent("bad-request", "Event header is not a JSON object")
        event_type = header.get("type")
        data_length = _length(header, "data_length")
        payload_length = _length(header, "payload_length")
        if data_length is None or payload_length is None:
            return BadEvent("bad-request", "data_length and payload_length must be non-negative integers")
        if not isinstance(event_type, str) or not event_type:
            await _discard(reader, data_length + payload_length)
            return BadEvent("bad-request", "Event header has no 'type'")

        if data_length > max_data_bytes or payload_length > max_payload_bytes:
            await _discard(reader, data_length + payload_length)
            return BadEvent(
                "too-large",
                f"Event {event_type!r} is too large ({data_length} data bytes, {payload_length} payload bytes)",
                event_type,
            )

        data = header.get("data")
        if data is None:
            data = {}
        if not isinstance(data, dict):
            await _discard(reader, data_length + payload_length)
            return BadEvent("bad-request", f"Event {event_type!r}: 'data' is not a JSON object", event_type)
        if data_length:
            block = await reader.readexactly(data_length)
            try:
                extra = _loads(block)
            except ValueError as err:
                await _discard(reader, payload_length)
                return BadEvent(
                    "bad-request", f"Event {event_type!r}: data block is not usable JSON ({err})", event_type
                )
            if not isinstance(extra, dict):
                await _discard(reader, payload_length)
                return BadEvent("bad-request", f"Event {event_type!r}: data block is not a JSON object", event_type)
            data = {**data, **extra}
        payload = await reader.readexactly(payload_length) if payload_length else None
        return Event(type=event_type, data=data, payload=payload)
    except asyncio.IncompleteReadError:
        return None  # the client went away mid-event
