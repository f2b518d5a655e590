"""The engine: the shared BERT and the voices, and the model work on one sentence at a time."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import numpy as np

from ..runtime.cache import ModelCache, PreparationError
from ..runtime.children import ChildStop
from ..runtime.memory import available_memory, map_large_blocks_apart
from ..runtime.reference import Reference
from ..runtime.request import RuntimeRequest
from ..store import AivmxVoice, BertFiles, aivmx_voices, find_bert, find_voice, installed_voices
from ..text import Frontend, Phonemes, split_sentences
from ..text.hayakoe.sentences import cut_position
from ..text.rewrite import HomeAssistantReader
from .bert import BertEncoder
from .decode_plan import SentenceAudio
from .limits import fits_one_pass
from .loudness import Levels, ReferencePassage
from .pauses import BoundaryPause
from .runtimes import RuntimeMeasuring, Unmeasured
from .settings import SynthesisSettings
from .voice import Voice

_LOGGER = logging.getLogger(__name__)

# BERT attention grows with the square of the length: beyond these, hayakoe's
# whole-text passes would take seconds and gigabytes, so we bound them. These
# are cheap first cuts, by characters; what one model run may take is bounded
# by its phones (limits.py).
MAX_SENTENCE_CHARS = 300
MAX_PAUSE_TEXT_CHARS = 1000


def bounded_sentences(sentences: list[str], limit: int = MAX_SENTENCE_CHARS) -> list[str]:
    """Cut runaway sentences at the last comma or space before `limit` characters (hard cut if none)."""
    out: list[str] = []
    for sentence in sentences:
        while len(sentence) > limit:
            cut = cut_position(sentence, limit)
            out.append(sentence[:cut])
            sentence = sentence[cut:]
        if sentence:
            out.append(sentence)
    return out


# What a first start's optimizer children peak at (runtime/optimize.py, HayaKoe-size models): the
# BERT's 1.4 GB, a voice's 1.1 GB. Two run at once only with room for both and the server.
SIDE_BY_SIDE_MEMORY = 4 << 30


def prepares_side_by_side() -> bool:
    """Whether models may be optimized two at a time: two cores or more, and the memory for two children."""
    available = available_memory()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores >= 2 and available is not None and available >= SIDE_BY_SIDE_MEMORY


def _preparations_ahead(
    found: AivmxVoice | list[Path], name: str, cache: ModelCache, request: RuntimeRequest, stop: ChildStop
) -> list[Callable[[], None]]:
    """The steps that optimize voice `name` (an AIVMX speaker, or found in these data dirs) ahead of its
    loading; what fails here fails again there, where it is reported."""

    def logged(step: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                step()
            except Exception as err:  # reported by the voice's loading
                _LOGGER.debug("Optimizing voice %s ahead of its loading failed: %s", name, err)

        return run

    try:
        files = found if isinstance(found, AivmxVoice) else find_voice(found, name)
        return [logged(step) for step in Voice.preparations(files, cache, request, stop)]
    except Exception as err:  # reported by the voice's loading
        _LOGGER.debug("Voice %s cannot be optimized ahead of its loading: %s", name, err)
        return []


def _load_bert(files: BertFiles, cache: ModelCache, threads: int | None, stop: ChildStop) -> BertEncoder:
    bert = BertEncoder.load(files, cache, threads, stop)
    _LOGGER.info("Loaded BERT from %s", bert.origin)
    return bert


class UnknownVoice(KeyError):
    """A voice that is not loaded."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown voice"


@dataclass(frozen=True)
class KeptWords:
    """The Latin surfaces of a user dictionary, as the rewrite and the frontends leave them for OpenJTalk."""

    reader: HomeAssistantReader
    normalizer: frozenset[str]

    @classmethod
    def of(cls, keep_words: Sequence[str]) -> KeptWords:
        return cls(HomeAssistantReader(keep_words), frozenset(w.replace(" ", "") for w in keep_words))


@dataclass(frozen=True)
class TextPlan:
    """A text as the engine speaks it: rewritten to plain Japanese, split into bounded sentences."""

    text: str
    sentences: list[str]
    whole_text_pauses: bool  # pauses from one duration-predictor pass over the whole text


def plan_text(reader: HomeAssistantReader, text: str) -> TextPlan:
    """`text` rewritten by `reader` and split the way a whole text is spoken (no model needed)."""
    text = reader.rewrite(text)
    sentences = split_sentences(text)
    if len(sentences) == 1:
        sentences = [text]  # hayakoe reads a one-sentence text unsplit
    bounded = bounded_sentences(sentences)
    return TextPlan(text, bounded, len(text) <= MAX_PAUSE_TEXT_CHARS and len(bounded) == len(sentences))


class Engine:
    """The shared BERT and the voices, loaded once; `synthesize` is then cheap to call.

    Built from its parts, or from data dirs with `Engine.load`: heavy work
    (sessions, tokenizer) happens there and in `speech.warm_up`, so the first
    request pays no load cost. `speech.Speech` speaks with it.
    """

    def __init__(
        self,
        bert: BertEncoder,
        voices: Iterable[Voice],
        reader: HomeAssistantReader | None = None,
        measuring: RuntimeMeasuring | None = None,
    ) -> None:
        """`measuring`: the voices whose decoder runtime is still to be measured (see runtimes.py)."""
        self.bert = bert
        self.voices: dict[str, Voice] = {voice.name: voice for voice in voices}
        self.reader = reader or HomeAssistantReader()
        self.measuring = measuring

    @classmethod
    def load(
        cls,
        data_dirs: Sequence[Path],
        voices: Sequence[str] | None = None,
        threads: int | None = None,
        keep_words: Sequence[str] = (),
        cache_dir: Path | None = None,
        backend: str = "auto",
        precision: str = "auto",
        stop: ChildStop | None = None,
    ) -> Engine:
        """The BERT and `voices` (default: every installed one) from the first data dir that has each.

        `keep_words`: Latin surfaces of the user dictionary, left for OpenJTalk
        to read. `cache_dir` keeps the models optimized for this machine
        between runs (see runtime/cache.py); without it they are optimized
        again at every start. `backend` (auto, onnxruntime, openvino) and
        `precision` (auto, f32, bf16, f16; the decoder's) choose where the voices'
        models run: auto measures the runtimes here (runtime/measure.py), but
        never on the way to a first start: a voice not yet measured starts on
        ONNX Runtime f32 and is listed in `measuring` (runtimes.py) for the
        caller to measure. Each voice's `runtimes` holds the choice and its
        figures. Raises ValueError for an unknown or impossible pair. `stop`,
        from another thread, ends the optimizers and the loading (PreparationError "stopped").
        """
        request = RuntimeRequest(backend, precision, threads)
        map_large_blocks_apart()
        dirs = [Path(d) for d in data_dirs]
        cache = ModelCache(cache_dir)
        bert_files = find_bert(dirs)
        frontends: dict[bool, Frontend] = {}
        spaceless = [w.replace(" ", "") for w in keep_words]
        names = list(voices) if voices else installed_voices(dirs)
        aivmx = aivmx_voices(dirs)
        for path, reason in aivmx.refused.items():
            _LOGGER.warning("AIVMX file %s refused: %s", path, reason)
        refused: dict[Path, str] = {}
        loaded: list[Voice] = []
        stop = stop or ChildStop()
        levels: Levels | None = None
        references: dict[str, Future[tuple[np.ndarray, np.ndarray]]] = {}
        side_by_side = prepares_side_by_side()
        # The BERT loads on a thread of its own. Where the machine has the cores and the memory,
        # a second thread optimizes the voices' models ahead of their loading (a first start then
        # runs two optimizer children at once), and each voice is loaded as soon as its models are.
        with (
            ThreadPoolExecutor(max_workers=2 if side_by_side else 1, thread_name_prefix="prepare") as preparing,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="levels") as leveller,
        ):
            bert_loading = preparing.submit(_load_bert, bert_files, cache, threads, stop)
            if side_by_side:
                # Every synthesizer first, then the small duration predictors, so that the last voice's
                # predictor is not left to do after the last synthesizer.
                ahead = [
                    _preparations_ahead(aivmx.voices.get(name) or dirs, name, cache, request, stop)
                    for name in dict.fromkeys(names)
                ]
                for stage in zip_longest(*ahead):
                    for step in stage:
                        if step is not None:
                            preparing.submit(step)

            def frontend_for(add_blank: bool) -> Frontend:
                if add_blank not in frontends:
                    tokenizer = bert_loading.result().tokenizer
                    frontends[add_blank] = Frontend(tokenizer, add_blank=add_blank, keep_words=spaceless)
                return frontends[add_blank]

            def load_voice(name: str) -> Voice | None:
                """The voice, or None for an AIVMX file that is refused (the other voices are still served)."""
                found = aivmx.voices.get(name)
                if stop.stopped:  # between two voices: the one loaded takes no child to stop
                    raise PreparationError("Loading stopped", "stopped")
                if found is None:
                    return Voice.load(find_voice(dirs, name), frontend_for, cache, request, stop=stop)
                if found.path in refused:
                    return None
                try:
                    return Voice.load_aivmx(found, frontend_for, cache, request, stop=stop)
                except PreparationError as err:
                    if stop.stopped:
                        raise
                    refused[found.path] = err.reason
                    _LOGGER.warning("AIVMX file %s refused: %s", found.path, err.reason)
                    return None

            try:
                if not side_by_side:
                    bert_loading.result()
                # A voice's level is measured (first start) while the next voice is prepared: the one
                # runs the models here, the other is mostly a child process on another core.
                levelled: list[Future[None]] = []
                for name in dict.fromkeys(names):
                    voice = load_voice(name)
                    if voice is not None:
                        loaded.append(voice)
                        if levels is None:
                            levels = Levels(bert_loading.result(), cache.folder)
                            stop.when_stopped(levels.stop)
                        passage = ReferencePassage(voice, bert_loading.result())  # its fronts made once for both
                        levelled.append(leveller.submit(levels.set, voice, passage))
                        if voice.entry is not None and voice.entry.unmeasured:  # what its measuring will judge on
                            references[voice.name] = leveller.submit(passage.latent)
                for level in levelled:
                    level.result()
                bert = bert_loading.result()
            except BaseException:  # a model refused, or a stop: the optimizers beside and the level are given up
                preparing.shutdown(wait=False, cancel_futures=True)
                stop.stop()
                if levels is not None:
                    levels.stop()
                raise
        if levels is not None:
            levels.save()
        unmeasured = [
            Unmeasured(voice, voice.entry, Reference(*references[voice.name].result(), voice.sample_rate))
            for voice in loaded
            if voice.entry and voice.entry.unmeasured
        ]
        return cls(bert, loaded, HomeAssistantReader(keep_words), RuntimeMeasuring(cache, request, unmeasured))

    @property
    def kept_words(self) -> KeptWords:
        """The words left for OpenJTalk now (restore them with `keep_words`)."""
        frontends = [voice.frontend.keep_words for voice in self.voices.values()]
        return KeptWords(self.reader, frontends[0] if frontends else frozenset())

    def keep_words(self, kept: KeptWords) -> None:
        """From now on, leave `kept` for OpenJTalk: a new user dictionary's surfaces, in the rewrite and every frontend.

        Call it where the worker cannot be running a step (on the worker itself).
        """
        self.reader = kept.reader
        for voice in self.voices.values():
            voice.frontend.keep_words = kept.normalizer

    def voice(self, name: str) -> Voice:
        try:
            return self.voices[name]
        except KeyError:
            raise UnknownVoice(f"Unknown voice {name!r}; loaded: {', '.join(self.voices) or 'none'}") from None

    def render_sentence(
        self,
        voice: Voice,
        sentence: str,
        settings: SynthesisSettings,
        quick_start: bool = True,
        phonemes: Phonemes | None = None,
    ) -> SentenceAudio:
        """float audio for one sentence, in pieces: frontend (unless its `phonemes` are given) → BERT → synthesizer."""
        if phonemes is None:
            phonemes = voice.frontend.phonemize(sentence)
        return voice.render(phonemes, self.bert.features(phonemes), settings, quick_start)

    def boundary_pauses(
        self, voice: Voice, text: str, sentences: int, settings: SynthesisSettings
    ) -> BoundaryPause | None:
        """Pauses at the sentence boundaries of `text`, from one duration-predictor pass over all of it.

        None when `text` has more phones than one pass may take (see
        limits.py): each pause is then predicted over its own boundary.
        """
        if sentences <= 1 or not voice.has_duration_predictor:
            return BoundaryPause()
        phonemes = voice.frontend.phonemize(text)
        if not fits_one_pass(phonemes):
            return None
        durations = voice.predict_durations(phonemes, self.bert.features(phonemes), settings)
        if durations is None:
            return BoundaryPause()
        return BoundaryPause.from_durations(
            durations, phonemes.phone_ids, sentences - 1, voice.config.hop_length, voice.sample_rate
        )

    def bounded(self, sentence: str) -> list[str]:
        """`sentence` in parts short enough for one pass of the models."""
        return bounded_sentences([sentence], MAX_SENTENCE_CHARS) or [sentence]

    def plan(self, text: str) -> TextPlan:
        """`text` rewritten and split the way a whole text is spoken."""
        return plan_text(self.reader, text)
