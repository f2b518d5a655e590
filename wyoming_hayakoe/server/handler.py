"""One client connection, speaking the Wyoming TTS protocol as Home Assistant uses it.

    describe                      → info
    ping                          → pong
    synthesize {text, voice?}     → audio-start, audio-chunk…, audio-stop
                                    (or error, then the connection closes,
                                    with no audio-stop after audio begun)
    synthesize-start {voice?}     ┐
    synthesize-chunk {text} …     │ → audio-start, audio-chunk… as sentences complete,
    synthesize {text}  (ignored)  │   audio-stop, synthesize-stopped
    synthesize-stop               ┘   (an error, if any, comes before both)
    select-program, other events  → ignored, as the protocol asks

Reading never waits for synthesis: each request gets a response task, and
the reader keeps taking events (so streamed text is segmented while earlier
sentences are being spoken, and a reset connection is noticed at once).
Responses on one connection are written in request order. Every synthesis
request ends in `HayakoeHandler._end`: an `error` event with a stable `code`
if it failed, `audio-stop` for audio begun (not after a plain synthesize's
error), `synthesize-stopped` last for a stream. A text with nothing to say
is a short silence. Malformed events get error `bad-request` and the connection stays.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress

from wyoming.event import Event, write_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from ..engine.reading import log_reading
from ..engine.settings import SynthesisSettings
from ..engine.speech import Speech, play
from ..worker import Lane, LaneClosed
from .audio import AudioOut
from .events import BadEvent, read_event
from .requests import (
    Codes,
    RequestError,
    internal_error,
    nothing_to_say,
    refusal,
    shutting_down,
    text_of,
    unreadable,
    voice_of,
)
from .responses import Responses
from .service import Service
from .streaming import END, Stream, StreamFailed
from .wording import counted

_LOGGER = logging.getLogger(__name__)

LINGER_S = 5.0  # seconds a hung-up connection waits for the client to close its side
SILENCE_S = 0.1  # the answer to a text with nothing to say: valid audio, where no audio breaks players


class HayakoeHandler:
    """Reads events from one client and answers them (see module docstring)."""

    def __init__(
        self,
        service: Service,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str = "",
        stdio: bool = False,
    ) -> None:
        self.service = service
        self.stdio = stdio  # the one connection: closing it would end the server
        self.reader = reader
        self.writer = writer
        self.peer = peer or "client"
        self._responses = Responses(self.peer, self.write_event, self._hang_up)
        self._stream: Stream | None = None
        self._requests = 0
        self._running = True  # taking requests
        self._reading = True
        self._read: asyncio.Future | None = None  # the event being read
        self._lanes: set[Lane] = set()

    # -- connection --------------------------------------------------------------

    async def run(self) -> None:
        options = self.service.options
        _LOGGER.debug("%s connected", self.peer)
        gone = False
        try:
            while self._reading:
                self._read = asyncio.ensure_future(read_event(self.reader, options.max_data_bytes, 1 << 20))
                await asyncio.wait([self._read])
                if self._read.cancelled():
                    break  # `_stop_reading`
                try:
                    item = self._read.result()
                except (ConnectionError, OSError):
                    gone = True
                    break
                if item is None:
                    break
                if not self._running:
                    continue  # hung up: what the client still sends is dropped until it closes
                if isinstance(item, BadEvent):
                    self._on_bad_event(item)
                    continue
                try:
                    self._on_event(item)
                except RequestError as err:
                    _LOGGER.warning("%s: %s refused: %s (error %s)", self.peer, item.type, err.text, err.code)
                    self._reply(err.event())
            if not gone and self._responses.any:
                # End of input: stdin closed, or a socket shut for writing only
                # (`… | nc`); the answers are still wanted. A client that is
                # really gone shows when writing to it fails, which drops its work.
                if self._stream is not None:
                    self._end_stream_input(
                        RequestError(Codes.BAD_REQUEST, "The input ended inside a stream, before synthesize-stop")
                    )
                await self._responses.written()
        finally:
            await self._close()

    async def stop(self) -> None:
        """Server shutdown: stop reading; requests in progress end with error shutting-down.

        Closing their lanes makes each one's next step raise LaneClosed, which
        it answers through `_end`; `run` then closes the connection.
        """
        self._stop_reading()
        if self._stream is not None:
            self._end_stream_input(shutting_down())
        for lane in list(self._lanes):
            lane.close()

    async def _close(self) -> None:
        self._stop_reading()
        if self._stream is not None:  # a stream that can never be completed
            self._stream.fail(RequestError(Codes.BAD_REQUEST, "connection closed"))
            self._stream = None
        await self._responses.cancel(timeout=5)
        try:
            self.writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass
        _LOGGER.debug("%s disconnected", self.peer)

    async def write_event(self, event: Event) -> None:
        await self.write_events([event])

    async def write_events(self, events: Sequence[Event]) -> None:
        """`events` in one write to the connection, so that nothing can pause the server between them."""
        buffer = io.BytesIO()
        for event in events:
            write_event(event, buffer)
        self.writer.write(buffer.getvalue())
        await self.writer.drain()

    def _respond(self, respond: Callable[[], Awaitable[None]], lane: Lane | None = None) -> None:
        """Run `respond` after every earlier response on this connection has been written (its `lane`,
        if any, closed when it ends)."""

        def finished() -> None:
            if lane is not None:
                lane.close()
                self._lanes.discard(lane)

        self._responses.add(respond, finished)

    def _stop_reading(self) -> None:
        """Take no more events (the read in progress is dropped; the writer stays usable)."""
        self._running = self._reading = False
        if self._read is not None:
            self._read.cancel()

    def _hang_up(self) -> None:
        """End the connection after the current response; the requests after it are dropped.

        Our side is shut at once (the client reads the end after what was
        written), but the socket is closed only once the client has closed
        its side too, or after `LINGER_S` seconds: closing a socket with
        unread input sends a reset, which can destroy the answer before the
        client has read it.
        """
        self._running = False
        self._responses.drop_others()
        try:
            self.writer.write_eof()
        except (ConnectionError, OSError, RuntimeError):
            pass
        asyncio.get_running_loop().call_later(LINGER_S, self._stop_reading)

    def _fail(self, label: str, error: RequestError) -> None:
        """Answer a plain synthesize that cannot even start."""
        self._respond(lambda: self._end(label, None, error))

    def _reply(self, event: Event) -> None:
        """A one-event answer, in order with the other responses."""

        async def send() -> None:
            await self.write_event(event)

        self._respond(send)

    async def _end(
        self,
        label: str,
        out: AudioOut | None,
        error: RequestError | None,
        stream: Stream | None = None,
        why_silent: str | None = None,
    ) -> None:
        """How every synthesis request ends: its last events, always in this order.

        1. `error`, if the request failed; if it succeeded with nothing to
           say (`why_silent`: blank, only symbols or markup), SILENCE_S of
           silence, the same on both paths: a player given no audio at all
           fails (HA's MP3 of an empty stream cannot be read).
        2. `audio-stop`, whenever `audio-start` went out, and for a request
           that succeeded; but not after the error of a plain synthesize,
           even with its audio begun: Home Assistant up to 2026.2 ignores `error`, takes the
           first `audio-stop` as a normal end and caches the cut-off audio
           for good. Ended without it, the exchange is a failure to every
           client (HA says "no audio", caches nothing), as after a crash.
        3. For a stream: `synthesize-stopped`, once the client has ended its
           text with synthesize-stop.

        After the error of a plain synthesize the connection is closed (not
        for stdio, whose end would stop the server: there `audio-stop` still
        ends the answer). Home Assistant up to 2026.2 waits, with no timeout,
        for audio-stop or the end of the connection; the end is what every
        version notices, and what wyoming-piper's failing handler gives too.
        A stream needs no hang-up: synthesize-stopped ends every version's
        read. Its audio already sent cannot be taken back (HA up to 2026.2
        keeps it whatever follows), so a failed stream still ends in
        `audio-stop` and `synthesize-stopped` after its `error`, which newer
        HA reports as a failure.
        """
        if error is not None:
            how = f"stopped after {out.seconds:.1f} s of audio" if out is not None and out.started else "refused"
            _LOGGER.warning("%s %s: %s (error %s)", label, how, error.text, error.code)
            await self.write_event(error.event())
        elif out is not None and why_silent and not out.started:
            _LOGGER.info(
                "%s: nothing to say (%s); answering with %d ms of silence", label, why_silent, SILENCE_S * 1000
            )
            await out.silence(SILENCE_S)
        hang_up = error is not None and stream is None and not self.stdio
        if out is not None and (out.started or error is None) and not hang_up:
            await out.stop()
        if stream is not None:
            while not stream.queue.empty() or self._stream is stream:
                # The rest of a failed stream: wait for its synthesize-stop.
                if await stream.queue.get() is END:
                    break
            await self.write_event(SynthesizeStopped().event())
        elif hang_up:
            self._hang_up()

    # -- events ------------------------------------------------------------------

    def _on_bad_event(self, bad: BadEvent) -> None:
        _LOGGER.warning("%s: %s", self.peer, bad.text)
        stream = self._stream
        if stream is not None and bad.code == "too-large" and bad.type == "synthesize":
            return  # the duplicate of a stream's text: ignored anyway
        error = refusal(bad, self.service.options.max_text_length)
        if stream is not None and bad.type in ("synthesize-chunk", "synthesize-stop", "synthesize-start"):
            stream.fail(error)
        elif error.code == Codes.TEXT_TOO_LONG and bad.type == "synthesize":
            self._fail(self._next_label("synthesize"), error)  # a real request (HA sends long texts)
        else:
            self._reply(error.event())

    def _on_event(self, event: Event) -> None:
        _LOGGER.debug("%s → %s", self.peer, event.type)
        if Describe.is_type(event.type):
            self._reply(self.service.info_event)
        elif Synthesize.is_type(event.type):
            self._on_synthesize(event)
        elif SynthesizeStart.is_type(event.type):
            self._on_synthesize_start(event)
        elif SynthesizeChunk.is_type(event.type):
            self._on_synthesize_chunk(event)
        elif SynthesizeStop.is_type(event.type):
            self._on_synthesize_stop()
        elif Ping.is_type(event.type):
            text = event.data.get("text")
            self._reply(Pong(text=text if isinstance(text, str) else None).event())
        else:
            # select-program (we are the only program), and anything not for a TTS
            # server: the protocol says to ignore events one does not handle.
            _LOGGER.debug("%s: ignoring %s event", self.peer, event.type)

    def _next_label(self, kind: str) -> str:
        self._requests += 1
        return f"{self.peer}#{self._requests} {kind}"

    # synthesize ------------------------------------------------------------------

    def _on_synthesize(self, event: Event) -> None:
        if self._stream is not None:
            return  # the full text HA sends inside a stream, for old servers: ignored
        service = self.service
        text = text_of(event.data, "synthesize")  # malformed: bad-request, the connection stays
        voice = voice_of(event.data)
        label = self._next_label("synthesize")
        try:
            voice_name, settings = service.settings_for(voice)
            service.check_length(len(text))
            if not text.strip():  # nothing to say: no model work, so never busy
                rate = service.engine.voice(voice_name).sample_rate
                out = AudioOut(self.write_events, rate, service.options.samples_per_chunk)
                self._respond(lambda: self._end(label, out, None, why_silent="the text is blank"))
                return
            lane = service.open_lane(label)
        except RequestError as err:
            self._fail(label, err)
            return
        self._lanes.add(lane)
        self._respond(lambda: self._speak_text(lane, label, text, voice_name, settings), lane)

    async def _speak_text(
        self, lane: Lane, label: str, text: str, voice_name: str, settings: SynthesisSettings
    ) -> None:
        engine = self.service.engine
        speech = Speech(engine, voice_name, settings, label)
        out = AudioOut(self.write_events, speech.voice.sample_rate, self.service.options.samples_per_chunk)
        error: RequestError | None = None
        try:
            if _LOGGER.isEnabledFor(logging.DEBUG):
                await lane.run(lambda: log_reading(_LOGGER, label, engine, voice_name, text, settings))
            await play(speech, speech.text(text), out, lane.run)
            error = unreadable(speech.result)
        except LaneClosed:  # only `stop` closes the lane of a running synthesize
            error = shutting_down()
        except (ConnectionError, OSError):
            raise  # the client is gone (handled by the caller)
        except Exception:  # a bug: answer, and still end the request properly
            _LOGGER.exception("%s: synthesis failed", label)
            error = internal_error()
        await self._end(label, out, error, why_silent=nothing_to_say(speech.result))
        if error is None and speech.result.spoken:
            _log_done(label, f"{voice_name}/{settings.style}", len(text), speech, out)

    # streaming -------------------------------------------------------------------

    def _on_synthesize_start(self, event: Event) -> None:
        if self._stream is not None:
            _LOGGER.warning("%s: synthesize-start inside a stream; ending the previous stream", self.peer)
            self._on_synthesize_stop()
        service = self.service
        label = self._next_label("stream")
        stream = Stream(service, label)
        self._stream = stream
        try:
            voice_name, settings = service.settings_for(voice_of(event.data))
            stream.voice = f"{voice_name}/{settings.style}"
            stream.speech = Speech(service.engine, voice_name, settings, label)
            stream.lane = service.open_lane(label)
            self._lanes.add(stream.lane)
        except RequestError as err:
            stream.fail(err)
        self._respond(lambda: self._stream_out(stream), stream.lane)

    def _on_synthesize_chunk(self, event: Event) -> None:
        stream = self._stream
        if stream is None:
            raise RequestError(Codes.BAD_REQUEST, "synthesize-chunk outside a stream: send synthesize-start first")
        if stream.failed:
            return
        try:
            text = text_of(event.data, "synthesize-chunk")
            stream.length += len(text)
            self.service.check_length(stream.length)
        except RequestError as err:
            stream.fail(err)
            return
        stream.add(stream.segmenter.feed(text))

    def _on_synthesize_stop(self) -> None:
        stream = self._stream
        if stream is None:
            # Nothing to stop; answer anyway so a client waiting for it does not hang.
            self._reply(SynthesizeStopped().event())
            return
        self._stream = None
        if not stream.failed:
            stream.add(stream.segmenter.finish())
        stream.queue.put_nowait(END)

    def _end_stream_input(self, error: RequestError) -> None:
        """No more text will come for the open stream: it fails with `error`."""
        assert self._stream is not None
        self._stream.fail(error)
        self._on_synthesize_stop()

    async def _stream_out(self, stream: Stream) -> None:
        error: RequestError | None = None
        out: AudioOut | None = None
        spoken: list[str] = []
        if stream.failed or stream.speech is None or stream.lane is None:
            error = await stream.error()
        else:
            speech, lane = stream.speech, stream.lane
            out = AudioOut(self.write_events, speech.voice.sample_rate, self.service.options.samples_per_chunk)
            try:
                async for sentence in stream.sentences():
                    spoken.append(sentence)
                    await play(speech, speech.sentence(sentence), out, lane.run)
                error = unreadable(speech.result)
            except StreamFailed as failed:
                error = failed.error
            except LaneClosed:  # the stream failed, or `stop` closed the lane of one fully read
                error = await stream.error() if stream.failed else shutting_down()
            except (ConnectionError, OSError):
                raise  # the client is gone (handled by the caller)
            except Exception:  # a bug: answer, and still end the stream properly
                _LOGGER.exception("%s: synthesis failed", stream.label)
                stream.fail(internal_error())
                error = await stream.error()
        why_silent = nothing_to_say(stream.speech.result) if stream.speech is not None else None
        await self._end(stream.label, out, error, stream, why_silent)
        if (
            out is not None
            and stream.speech is not None
            and stream.lane is not None
            and error is None
            and not why_silent
        ):
            _log_done(stream.label, stream.voice, stream.length, stream.speech, out)
            if _LOGGER.isEnabledFor(logging.DEBUG):  # the text is complete only now, its audio sent
                speech, text = stream.speech, "".join(spoken)
                with suppress(LaneClosed):  # the server stopping meanwhile
                    await stream.lane.run(
                        lambda: log_reading(
                            _LOGGER, stream.label, speech.engine, speech.voice.name, text, speech.settings
                        )
                    )


def _log_done(label: str, voice: str, chars: int, speech: Speech, out: AudioOut) -> None:
    result = speech.result
    _LOGGER.info(
        "%s: %s, %s, %s → %.2f s audio in %.2f s (first audio after %.2f s)",
        label,
        voice,
        counted(chars, "character"),
        counted(result.sentences, "sentence"),
        out.seconds,
        time.monotonic() - speech.created,
        result.first_audio or 0.0,
    )
