"""The voices' decoder runtimes, measured after the start and switched to between requests.

Measuring the candidate runtimes takes longer than everything else a first
start does, so it never delays one: a voice whose cache entry is unmeasured
(`--backend auto`, the first time) starts on ONNX Runtime f32, and
`RuntimeMeasuring.run` then measures such voices one at a time in a
low-priority child process (runtime/measure.py), which stores the choice in
the entry, so a warm start opens the chosen runtime directly. Each result
is handed to `switch` as a function that installs it; the caller runs that
where no request can be using the voice (the server: when no request is in
progress; a command line: at once, before it speaks).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..runtime import loading
from ..runtime.cache import ModelCache, PreparationError
from ..runtime.children import ChildStop
from ..runtime.entry import DECODER, DECODER_STEP, PreparedModel
from ..runtime.reference import Reference
from ..runtime.request import RuntimeRequest
from .voice import Voice

_LOGGER = logging.getLogger(__name__)

#: Gets a function that installs a measured runtime; runs it when no request uses the voice.
Switch = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class Unmeasured:
    """A voice running on ONNX Runtime f32 until its entry's decoder is measured on `reference`, its front's
    output for the reference passage (loudness.ReferencePassage)."""

    voice: Voice
    entry: PreparedModel
    reference: Reference


class RuntimeMeasuring:
    """The voices still to measure, measured one at a time by `run`; `stop` ends it from another thread."""

    def __init__(self, cache: ModelCache, request: RuntimeRequest, pending: list[Unmeasured]) -> None:
        self.cache = cache
        self.request = request
        self.pending = pending
        self._stop = ChildStop()

    def run(self, switch: Switch) -> None:
        """Measure every pending voice in turn, handing each result to `switch`; returns when done or stopped."""
        while self.pending and not self._stop.stopped:
            item = self.pending[0]
            try:
                with tempfile.TemporaryDirectory(prefix="wyoming-hayakoe-reference-") as folder:
                    reference = Path(folder) / "reference.npz"
                    item.reference.save(reference)
                    measured = self.cache.measure(
                        item.entry, self.request, f"voice {item.voice.name}", self._stop, reference
                    )
                install = self._installer(item.voice, measured)
            except Exception as err:  # the measurement, or the chosen runtime refusing to open its model here
                if self._stop.stopped:
                    return
                lines = str(err).strip().splitlines() or [type(err).__name__]
                reason = err.reason if isinstance(err, PreparationError) else lines[0][:300]
                _LOGGER.warning(
                    "Voice %s: measuring failed (%s); its decoder stays on onnxruntime f32", item.voice.name, reason
                )
            else:
                switch(install)
            self.pending.pop(0)

    def _installer(self, voice: Voice, measured: PreparedModel) -> Callable[[], None]:
        """What puts `voice` on the measured runtime (opened now, off the worker) and logs it in one line."""
        choice = measured.runtime(DECODER_STEP)  # the voice's runtimes are keyed by role
        stays = choice.label == voice.runtimes.get(DECODER, choice).label
        models = voice.models if stays else loading.with_measured_decoder(voice.models, measured, self.request.threads)

        def install() -> None:
            voice.models = models
            voice.runtimes = {**voice.runtimes, DECODER: choice}
            voice.speed.factor = voice.measured_decode_factor() or voice.speed.factor
            _LOGGER.log(
                logging.WARNING if choice.disagreed else logging.INFO,
                "Voice %s %s; measured after the start: %s",
                voice.name,
                choice.summary(DECODER),
                f"stays on {choice.label}" if stays else f"switched to {choice.label}",
            )

        return install

    def run_now(self) -> None:
        """Measure and switch right here: for a command line, which speaks only after its start."""
        self.run(lambda install: install())

    def stop(self) -> None:
        """End a measurement in progress (its child is stopped; the entry stays unmeasured) and any to come."""
        self._stop.stop()
