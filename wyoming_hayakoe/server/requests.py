"""What a Wyoming request may carry, and the `error` events that answer it."""

from __future__ import annotations

from typing import Any

from wyoming.error import Error
from wyoming.event import Event
from wyoming.tts import SynthesizeVoice

from ..engine.speech import SpeechResult
from .events import BadEvent


class Codes:
    """The `code` of every `error` event this server sends."""

    EMPTY_TEXT = "empty-text"
    UNKNOWN_VOICE = "unknown-voice"
    UNKNOWN_STYLE = "unknown-style"
    INVALID_VOICE_NAME = "invalid-voice-name"
    TEXT_TOO_LONG = "text-too-long"
    UNPRONOUNCEABLE = "unpronounceable"
    BUSY = "busy"
    BAD_REQUEST = "bad-request"
    SHUTTING_DOWN = "shutting-down"
    INTERNAL = "internal"


class RequestError(Exception):
    """A request that is answered with an `error` event."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text

    def event(self) -> Event:
        return Error(text=self.text, code=self.code).event()


def voice_of(data: dict[str, Any]) -> SynthesizeVoice | None:
    """The `voice` of a synthesize/synthesize-start event, checked for type."""
    raw = data.get("voice")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RequestError(Codes.BAD_REQUEST, '\'voice\' must be an object like {"name": ..., "speaker": ...}')
    for key in ("name", "speaker", "language"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise RequestError(Codes.BAD_REQUEST, f"'voice.{key}' must be a string")
    return SynthesizeVoice(name=raw.get("name"), speaker=raw.get("speaker"), language=raw.get("language"))


def text_of(data: dict[str, Any], event_type: str) -> str:
    text = data.get("text")
    if not isinstance(text, str):
        raise RequestError(Codes.BAD_REQUEST, f"'{event_type}' needs a 'text' string")
    return text


def nothing_spoken(result: SpeechResult) -> RequestError | None:
    """The error for a request that made no sound at all (None if it did, or was asked nothing)."""
    failure = result.failure()
    return RequestError(Codes.UNPRONOUNCEABLE, failure) if failure is not None else None


def unreadable(result: SpeechResult) -> RequestError | None:
    """A Wyoming request's error when its text could not be read at all (the frontend refused every part).

    Text with nothing to say (blank, only symbols, emoji or markup) is no
    error there: it is answered with a short silence, which every player
    can play (see `nothing_to_say`).
    """
    return nothing_spoken(result) if result.skipped else None


def nothing_to_say(result: SpeechResult) -> str | None:
    """Why a Wyoming request that succeeded made no sound, for the log; None if it spoke."""
    if result.spoken:
        return None
    if result.unspeakable:
        return "no letters, kana, kanji or digits after removing markup and symbols"
    return "the text is blank"


def shutting_down() -> RequestError:
    return RequestError(Codes.SHUTTING_DOWN, "The server is shutting down")


def internal_error() -> RequestError:
    return RequestError(Codes.INTERNAL, "Internal server error (see the server log)")


def refusal(bad: BadEvent, max_text_length: int) -> RequestError:
    """The error a malformed event gets: a text over the limit is text-too-long, anything else bad-request."""
    if bad.code == "too-large" and bad.type in ("synthesize", "synthesize-chunk"):
        return RequestError(
            Codes.TEXT_TOO_LONG,
            f"Text is too long ({bad.text}); the limit is {max_text_length} characters (--max-text-length)",
        )
    return RequestError(Codes.BAD_REQUEST, bad.text)
