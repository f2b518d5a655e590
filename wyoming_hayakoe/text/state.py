"""The text layer's process-wide state, with one owner (:data:`STATE`) and one lock.

Three things outlive any one request:

* the user dictionary of the OpenJTalk every analysis uses (:mod:`.openjtalk`);
* what is cached over OpenJTalk's analyses (the native readings of words,
  and the per-reader caches built on them): only right for the dictionary
  that was in use when they were made;
* the e2k models (English → katakana, and the accent estimate of the user
  dictionary), loaded once, on first use.

A dictionary is installed with :meth:`TextState.use_user_dictionary`, in this
order under the lock: install it, clear the reading cache, bump
:attr:`TextState.generation` (per-object caches compare it and drop theirs).
Readings are looked up and cached under the same lock, so none made with the
old dictionary can be cached after the change.  The engine reads text from
one worker thread; the lock keeps a reader on another thread (a web page)
safe too.

:meth:`TextState.lent` puts another dictionary in place for a while (a web
page trying an entry before it is saved): its own OpenJTalk and reading
cache, swapped in and back under the lock, so the cache of the dictionary in
use never sees its readings and no generation passes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from . import openjtalk

#: Part of speech of a word OpenJTalk does not know (it would spell it out).
_UNKNOWN_WORD_POS = "フィラー"
_SYMBOL_POS = "記号"
_ACCENT_MARK = "’"
_KATAKANA_RE = re.compile(r"[\u30a1-\u30fa\u30fc]+")

#: A word's analysis: (part of speech, reading without accent marks) per node.
Analysis = tuple[tuple[str, str], ...]
#: e2k's character model and its "is this a pronounceable word" check.
E2KModels = tuple[Callable[[str], str], Callable[[str], bool]]


class Lexicon:
    """A user dictionary as the text state uses it: its own OpenJTalk and the readings cached with it."""

    def __init__(self, dic_path: Path | None) -> None:
        """``dic_path``: a compiled user dictionary, or None for OpenJTalk's own dictionary only."""
        self.analyser = openjtalk.make_analyser(dic_path)
        self.analysis = lru_cache(maxsize=16384)(TextState._analyse)


class TextState:
    """Owns pyopenjtalk's user dictionary, the reading cache over it and the e2k models."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._generation = 0
        self._analysis = lru_cache(maxsize=16384)(self._analyse)
        self._e2k: E2KModels | None = None
        self._accent: Callable[[str], int] | None = None

    @property
    def generation(self) -> int:
        """Dictionaries installed so far: a cache over readings made at another generation is stale."""
        return self._generation

    def use_user_dictionary(self, dic_path: Path | None) -> None:
        """Make every later analysis use the compiled user dictionary ``dic_path`` (None: none at all)."""
        self.use(Lexicon(dic_path))

    def use(self, lexicon: Lexicon) -> None:
        """Make every later analysis use ``lexicon`` (a dictionary compiled before, see :class:`Lexicon`)."""
        with self._lock:
            openjtalk.use_analyser(lexicon.analyser)
            self._analysis = lexicon.analysis
            self._generation += 1

    @contextmanager
    def lent(self, lexicon: Lexicon) -> Iterator[None]:
        """Within: every analysis uses ``lexicon``; after it, the dictionary and cache in use before."""
        with self._lock:
            analyser, analysis = openjtalk.current_analyser(), self._analysis
            openjtalk.use_analyser(lexicon.analyser)
            self._analysis = lexicon.analysis
            try:
                yield
            finally:
                openjtalk.use_analyser(analyser)
                self._analysis = analysis

    def native_reading(self, word: str, *, whole_word: bool = False) -> str | None:
        """Katakana reading of ``word`` from OpenJTalk's dictionary, or None if it does not know it.

        By HayaKoe's rule (the default) a word is unknown when any part of its
        analysis is tagged ``フィラー``; the reading is that of all its parts.
        With ``whole_word`` (our English reader's rule) the dictionary must
        have it as one word, not a symbol, with a katakana reading.
        """
        with self._lock:
            analysis = self._analysis(word)
        if whole_word:
            if len(analysis) != 1 or analysis[0][0] in (_SYMBOL_POS, _UNKNOWN_WORD_POS):
                return None
            reading = analysis[0][1]
            return reading if _KATAKANA_RE.fullmatch(reading) else None
        if any(pos == _UNKNOWN_WORD_POS for pos, _ in analysis):
            return None
        return "".join(pron for _, pron in analysis) or None

    def e2k_models(self) -> E2KModels:
        """e2k's character model and its "is this a pronounceable word" check (about 13 MB, loaded once)."""
        with self._lock:
            if self._e2k is None:
                from e2k import C2K, NGram

                self._e2k = (C2K(), NGram())
            return self._e2k

    def accent_predictor(self) -> Callable[[str], int]:
        """e2k's accent estimate for a katakana reading (loaded once)."""
        with self._lock:
            if self._accent is None:
                from e2k import AccentPredictor

                self._accent = AccentPredictor()
            return self._accent

    @staticmethod
    def _analyse(word: str) -> Analysis:
        return tuple((node["pos"], node["pron"].replace(_ACCENT_MARK, "")) for node in openjtalk.run_frontend(word))


#: The one owner of the process-wide text state.
STATE = TextState()

__all__ = ["STATE", "Lexicon", "TextState"]
