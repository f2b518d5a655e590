"""The page's API: info, speak (streamed PCM), reading, and the user dictionary (get, save, try).

All model work goes through the server's one worker, in a lane per
request, exactly as a Wyoming request's does: the same limits and settings
bounds, the same round-robin (a long page request delays a Wyoming client
by at most one step), and a client that goes away cancels its work (the
handler is cancelled, which drops the lane).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import quote

import numpy as np
from aiohttp import web
from wyoming.tts import SynthesizeVoice

from .. import __version__
from ..engine.reading import TextReading, log_reading, read_text
from ..engine.settings import BOUNDS, SynthesisSettings
from ..engine.speech import RunStep, Speech, play
from ..server.info import AMITARO, JVNV, TSUKUYOMI, voice_entries
from ..server.requests import Codes, RequestError, internal_error, nothing_spoken
from ..server.service import Service
from ..text.errors import UserDictionaryError
from ..worker import Lane, LaneClosed
from .dictionary import DictionaryFile, Trial, check_entries
from .requests import (
    BAD_DICTIONARY,
    NO_DICTIONARY,
    ApiError,
    EntryErrors,
    json_object,
    json_response,
    optional_string,
    raw_entries,
    raw_entry,
    settings_of,
    text_of,
)

_LOGGER = logging.getLogger(__name__)

T = TypeVar("T")

_LICENCES = {
    JVNV.name: "CC BY-SA 4.0",
    TSUKUYOMI.name: "Tsukuyomi-chan corpus licence",
    AMITARO.name: "Amitaro's voice material terms",
}
_SPEAK_FIELDS = ("text", "voice", "style", *BOUNDS)
_TRY_TEXT = "「{surface}」と読みます。"


class PcmResponse:
    """An `AudioSink` that streams raw 16-bit mono PCM as the body of a chunked response."""

    def __init__(self, request: web.Request, headers: dict[str, str] | None = None) -> None:
        self.request = request
        self.response = web.StreamResponse(headers=headers)
        self.started = False

    async def start(self, rate: int) -> None:
        if not self.started:
            self.started = True
            self.response.headers["Content-Type"] = f"audio/L16; rate={rate}; channels=1"
            self.response.headers["X-Sample-Rate"] = str(rate)
            self.response.headers["Cache-Control"] = "no-store"
            await self.response.prepare(self.request)

    async def add(self, audio: np.ndarray) -> None:
        await self.response.write(np.ascontiguousarray(audio, dtype="<i2").tobytes())

    async def stop(self) -> None:
        await self.response.write_eof()

    def abort(self) -> web.StreamResponse:
        """End a body already begun without its last chunk, so the client sees it cut short."""
        self.response.force_close()
        if self.request.transport is not None:
            self.request.transport.close()
        return self.response


class Api:
    """The request handlers; `routes` lists them for the app."""

    def __init__(self, service: Service, dictionary: DictionaryFile) -> None:
        self.service = service
        self.dictionary = dictionary
        self._ids = itertools.count(1)
        self._lanes: set[Lane] = set()

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/api/info", self.info),
            web.post("/api/speak", self.speak),
            web.post("/api/reading", self.reading),
            web.get("/api/dictionary", self.get_dictionary),
            web.put("/api/dictionary", self.put_dictionary),
            web.post("/api/dictionary/try", self.try_entry),
        ]

    # -- helpers ---------------------------------------------------------------

    def _label(self, request: web.Request, kind: str) -> str:
        return f"web {request.remote}#{next(self._ids)} {kind}"

    def _voice(self, body: dict) -> tuple[str, SynthesisSettings]:
        voice, style = optional_string(body, "voice"), optional_string(body, "style")
        try:
            name, settings = self.service.settings_for(SynthesizeVoice(name=voice, speaker=style))
        except RequestError as err:
            raise ApiError.of(err, "style" if err.code == Codes.UNKNOWN_STYLE else "voice") from None
        return name, replace(settings, **settings_of(body))

    def _text(self, body: dict) -> str:
        text = text_of(body)
        try:
            self.service.check_length(len(text))
        except RequestError as err:
            raise ApiError.of(err, "text") from None
        return text

    @contextmanager
    def _lane(self, label: str) -> Iterator[Lane]:
        """A lane for one request, closed when it ends, or when the server stops (`stop`)."""
        try:
            lane = self.service.open_lane(label)
        except RequestError as err:
            raise ApiError.of(err) from None
        self._lanes.add(lane)
        try:
            yield lane
        finally:
            lane.close()
            self._lanes.discard(lane)

    def stop(self) -> None:
        """Server shutdown: the work of every request in progress is dropped; each ends with shutting-down."""
        for lane in list(self._lanes):
            lane.close()

    async def _on_worker(self, label: str, work: Callable[[], T]) -> T:
        """`work` as one step on the worker, in a lane of its own."""
        with self._lane(label) as lane:
            try:
                return await lane.run(work)
            except LaneClosed:
                raise ApiError(Codes.SHUTTING_DOWN, "The server is shutting down") from None

    # -- info ------------------------------------------------------------------

    async def info(self, request: web.Request) -> web.Response:
        service = self.service
        voices = []
        for name in sorted(service.cards, key=lambda n: (n != service.options.default_voice, n)):
            card = service.cards[name]
            voices.append(
                {
                    "name": name,
                    "description": card.description,
                    "styles": list(card.styles),
                    "default_style": card.default_style,
                    # The voice list Home Assistant shows: the name to pick each style by.
                    "home_assistant": [
                        {"name": entry.name, "style": entry.style, "description": entry.description}
                        for entry in voice_entries(card)
                    ],
                    "sample_rate": service.engine.voices[name].sample_rate,
                    "attribution": {"name": card.attribution.name, "url": card.attribution.url},
                    "license": card.license
                    or _LICENCES.get(card.attribution.name, "see the voice model's own licence"),
                }
            )
        defaults = service.options.settings
        settings = {
            name: {"min": low, "max": high, "default": getattr(defaults, name)} for name, (low, high) in BOUNDS.items()
        }
        dictionary = self.dictionary
        return json_response(
            {
                "version": __version__,
                "default_voice": service.options.default_voice,
                "voices": voices,
                "settings": settings,
                "max_text_length": service.options.max_text_length,
                "dictionary": {
                    "enabled": dictionary.path is not None,
                    "path": str(dictionary.path) if dictionary.path is not None else None,
                    "writable": dictionary.writable,
                },
            }
        )

    # -- speaking --------------------------------------------------------------

    async def speak(self, request: web.Request) -> web.StreamResponse:
        body = await json_object(request, _SPEAK_FIELDS, too_large=Codes.TEXT_TOO_LONG)
        text = self._text(body)
        voice, settings = self._voice(body)
        label = self._label(request, "speak")
        with self._lane(label) as lane:
            return await self._stream(request, label, lane.run, text, voice, settings)

    async def _stream(
        self,
        request: web.Request,
        label: str,
        run: RunStep,
        text: str,
        voice: str,
        settings: SynthesisSettings,
        headers: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        """Speak `text` into a streamed PCM response, each step through `run`; errors before audio as JSON."""
        speech = Speech(self.service.engine, voice, settings, label)
        sink = PcmResponse(request, headers)
        try:
            if _LOGGER.isEnabledFor(logging.DEBUG):
                await run(lambda: log_reading(_LOGGER, label, self.service.engine, voice, text, settings))
            await play(speech, speech.text(text), sink, run)
            failure = nothing_spoken(speech.result)
        except LaneClosed:
            failure = RequestError(Codes.SHUTTING_DOWN, "The server is shutting down")
        except (ConnectionError, OSError):
            _LOGGER.info("%s: client gone; its work is dropped", label)
            raise
        except Exception:  # a bug: log it, answer, keep serving
            _LOGGER.exception("%s: synthesis failed", label)
            failure = internal_error()
        if failure is not None:
            if sink.started:
                _LOGGER.warning("%s: ended early after %d samples: %s", label, speech.result.samples, failure.text)
                return sink.abort()
            _LOGGER.info("%s: error %s: %s", label, failure.code, failure.text)
            return ApiError.of(failure).response()
        await sink.start(speech.voice.sample_rate)  # a text with nothing to say: an empty body
        await sink.stop()
        _LOGGER.info(
            "%s: %s/%s, %d chars → %.2f s audio (first audio after %.2f s)",
            label,
            voice,
            settings.style,
            len(text),
            speech.result.samples / speech.voice.sample_rate,
            speech.result.first_audio or 0.0,
        )
        return sink.response

    # -- reading ---------------------------------------------------------------

    async def reading(self, request: web.Request) -> web.Response:
        body = await json_object(request, ("text", "voice"), too_large=Codes.TEXT_TOO_LONG)
        text = self._text(body)
        voice, settings = self._voice(body)
        label = self._label(request, "reading")
        engine = self.service.engine

        def work() -> TextReading:
            found = read_text(engine, engine.voice(voice), text, settings)
            _LOGGER.debug("%s:\n%s", label, found.describe(text))
            return found

        found = await self._on_worker(label, work)
        return json_response(
            {
                "rewritten": found.rewritten,
                "sentences": [
                    {
                        "text": sentence.text,
                        "pause_after": sentence.pause_after,
                        "phrases": [
                            {"morae": [{"kana": m.kana, "high": m.high} for m in phrase.morae], "accent": phrase.accent}
                            for phrase in sentence.phrases
                        ],
                    }
                    for sentence in found.sentences
                ],
            }
        )

    # -- the dictionary --------------------------------------------------------

    def _dictionary_body(self) -> dict[str, Any]:
        """GET's answer (on the worker: it may estimate accents)."""
        try:
            entries = self.dictionary.entries()
        except UserDictionaryError as err:
            raise ApiError(BAD_DICTIONARY, str(err)) from None
        path = self.dictionary.path
        return {
            "path": str(path) if path is not None else None,
            "writable": self.dictionary.writable,
            "entries": [
                {
                    "surface": e.surface,
                    "reading": e.reading,
                    "accent": None if e.estimated else e.accent,
                    "priority": e.priority,
                }
                for e in entries
            ],
        }

    async def get_dictionary(self, request: web.Request) -> web.Response:
        return json_response(await self._on_worker(self._label(request, "dictionary"), self._dictionary_body))

    async def put_dictionary(self, request: web.Request) -> web.Response:
        body = await json_object(request, ("entries",))
        raw, shape_problems = raw_entries(body.get("entries"))
        if not self.dictionary.writable:
            path = self.dictionary.path
            where = f"{path} cannot be written" if path is not None else "no dictionary file is configured"
            raise ApiError(NO_DICTIONARY, f"The dictionary cannot be saved: {where}")
        label = self._label(request, "save dictionary")

        def work() -> dict[str, Any]:
            entries, problems = check_entries(raw, shape_problems)
            if problems:
                raise EntryErrors(problems)
            try:
                self.dictionary.save(entries)
            except (OSError, UserDictionaryError) as err:
                _LOGGER.error("%s: %s", label, err)
                raise ApiError(Codes.INTERNAL, f"The dictionary could not be saved: {err}") from None
            return self._dictionary_body()

        return json_response(await self._on_worker(label, work))

    async def try_entry(self, request: web.Request) -> web.StreamResponse:
        body = await json_object(request, ("entry", "text", "voice", "style"), too_large=Codes.TEXT_TOO_LONG)
        problems: list = []
        raw = raw_entry(body.get("entry"), 0, problems)
        if raw is None:
            raise EntryErrors(problems)
        voice, settings = self._voice(body)
        given = body.get("text")
        text = self._text(body) if given is not None else None
        label = self._label(request, "try entry")
        with self._lane(label) as lane:

            def prepare() -> tuple[Trial, str, str]:
                entries, found = check_entries([raw])
                if found:
                    raise EntryErrors(found)
                trial = self.dictionary.trial(entries[0])
                spoken = text if text is not None else _TRY_TEXT.format(surface=entries[0].surface)
                engine = self.service.engine
                reading = trial.run(lambda: read_text(engine, engine.voice(voice), spoken, settings, pauses=False))
                return trial, spoken, "".join(sentence.kana for sentence in reading.sentences)

            try:
                trial, spoken, kana = await lane.run(prepare)
            except LaneClosed:
                raise ApiError(Codes.SHUTTING_DOWN, "The server is shutting down") from None

            async def run(step: Callable[[], T]) -> T:
                return await lane.run(lambda: trial.run(step))

            headers = {"X-Reading": quote(kana, safe="")}
            return await self._stream(request, label, run, spoken, voice, settings, headers)
