"""What every connection shares: the engine, the worker, the options, the Info answer, the request checks."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from wyoming.tts import SynthesizeVoice

from ..engine.engine import MAX_SENTENCE_CHARS, Engine
from ..engine.settings import SynthesisSettings
from ..store import InvalidVoiceName
from ..worker import Busy, Lane, Scheduler, SchedulerClosed
from .info import StyleNotAvailable, VoiceCard, VoiceNotAvailable, build_info, resolve_voice
from .requests import Codes, RequestError


@dataclass(frozen=True)
class ServerOptions:
    """Behaviour knobs that come from the command line."""

    default_voice: str
    settings: SynthesisSettings = field(default_factory=SynthesisSettings)
    samples_per_chunk: int = 1024
    streaming: bool = True
    max_text_length: int = 10_000
    max_sentence_length: int = MAX_SENTENCE_CHARS  # streamed text; `Engine.synthesize` bounds whole texts alike

    @property
    def max_data_bytes(self) -> int:
        # JSON may spend up to 12 bytes on one character (a \uXXXX\uXXXX surrogate pair).
        return max(1 << 20, self.max_text_length * 12 + (1 << 16))


class Service:
    """What every connection shares: engine, scheduler, options and the Info answer."""

    def __init__(
        self, engine: Engine, scheduler: Scheduler, options: ServerOptions, cards: dict[str, VoiceCard]
    ) -> None:
        self.engine = engine
        self.scheduler = scheduler
        self.options = options
        self.cards = cards
        self.info_event = build_info(cards.values(), options.streaming, options.default_voice).event()

    # -- request checks (fast; on the event loop) --------------------------------

    def settings_for(self, voice: SynthesizeVoice | None) -> tuple[str, SynthesisSettings]:
        """The voice name and settings of a request; RequestError if they are not usable."""
        name = voice.name if voice is not None else None
        speaker = voice.speaker if voice is not None else None
        try:
            voice_name, style = resolve_voice(self.cards, self.options.default_voice, name, speaker)
        except InvalidVoiceName as err:
            raise RequestError(Codes.INVALID_VOICE_NAME, str(err)) from None
        except VoiceNotAvailable as err:
            raise RequestError(Codes.UNKNOWN_VOICE, str(err)) from None
        except StyleNotAvailable as err:
            raise RequestError(Codes.UNKNOWN_STYLE, str(err)) from None
        return voice_name, replace(self.options.settings, style=style)

    def check_length(self, length: int) -> None:
        limit = self.options.max_text_length
        if length > limit:
            raise RequestError(
                Codes.TEXT_TOO_LONG, f"Text is too long: {length} characters, the limit is {limit} (--max-text-length)"
            )

    def open_lane(self, label: str) -> Lane:
        try:
            return self.scheduler.open_lane(label)
        except Busy as err:
            raise RequestError(Codes.BUSY, str(err)) from None
        except SchedulerClosed as err:
            raise RequestError(Codes.SHUTTING_DOWN, str(err)) from None
