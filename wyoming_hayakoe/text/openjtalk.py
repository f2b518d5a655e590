"""The only way into OpenJTalk (pyopenjtalk): input it cannot take never reaches it.

The G2P is pyopenjtalk-plus (the module ``pyopenjtalk``): OpenJTalk with a
larger dictionary and reading fixes after the analysis (the reading of 何,
iteration marks, loanwords).  Every analysis is made here,
one way (:func:`run_frontend`: its options and our :mod:`.corrections`), on
an OpenJTalk instance of our own (:func:`make_analyser`; the one in use is
swapped with a user dictionary).

Measured with pyopenjtalk-plus 0.4.1.post10, each input in a child process:
none of the inputs that crashed the OpenJTalk build used before (8 KiB of
text, 344 kana in a row, long dictionary lines) crashes it, but

* ``run_frontend`` widens every printable ASCII character to a 3-byte
  full-width one and raises ``RuntimeError`` for more than 16,383 bytes of
  that (5,461 letters, kanji or kana, 4,095 emoji);
* its time grows faster than the length: 3,000 ASCII letters take a moment,
  5,461 did not finish in five minutes; ``make_label`` takes time growing
  with the square of the phones (about 0.4 s for 5,000);
* a word of more than 1,023 bytes is cut there (a user dictionary surface
  of 400 kana matches 341 of them), and a word of more than 512 bytes skips
  the devoicing of its vowels with a message on standard error;
* ``mecab_dict_index`` raises ``RuntimeError`` for a user dictionary line of
  more than about 8 KiB;
* a lone surrogate (possible in JSON text) cannot be encoded to UTF-8 and
  makes it raise; a NUL would be dropped.

So every caller goes through this module.  Text is cleaned (the characters
above removed; OpenJTalk drops control characters anyway) and cut into
pieces of at most :data:`MAX_PIECE_BYTES` widened bytes with kana runs of at
most :data:`MAX_KANA_RUN`, each analysed on its own; labels are made for
groups of at most :data:`MAX_LABEL_MORAE` morae.  The limits are a quarter
of the measured thresholds or less.  Text within them — every sentence the
engine speaks — is analysed in one piece.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Final, cast

import pyopenjtalk

from . import corrections
from .errors import UserDictionaryError

Features = list[dict[str, Any]]
#: One OpenJTalk (with or without a user dictionary); it serialises its own calls.
Analyser = pyopenjtalk.OpenJTalk

#: How pyopenjtalk-plus says いう: ユー where it is the verb's plain form (という, こういう, 言う).
IU_PRONUNCIATION: Final = "YuuBase"
#: Widened bytes per OpenJTalk call (it refuses more than 16,383; time grows faster than the length).
MAX_PIECE_BYTES = 4096
#: Kana in a row per OpenJTalk call (one unknown word; devoicing skips words of more than 512 bytes).
MAX_KANA_RUN = 170
#: Morae per make_label call (its time grows with the square of the phones).
MAX_LABEL_MORAE = 3000
#: Longest line and field of a user dictionary source (refused from about
#: 8 KiB a line; words longer than 1,023 bytes are cut off).
MAX_DICTIONARY_LINE_BYTES = 2048
MAX_DICTIONARY_FIELD_BYTES = 512

# ASCII control characters (OpenJTalk drops them; NUL would end the text)
# and lone surrogates (cannot be encoded).
_UNSAFE_RE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]+")
# A piece that must end is cut after one of these if there is one in its
# second half.
_SOFT_BREAKS = frozenset(" \u3000、。，．,.!?！？・…")


def clean(text: str) -> str:
    """``text`` without the characters OpenJTalk drops or cannot take."""
    return _UNSAFE_RE.sub("", text)


def is_kana(ch: str) -> bool:
    """Hiragana, katakana and their extensions, half-width katakana: what OpenJTalk may join into one unknown word."""
    return "\u3041" <= ch <= "\u30ff" or "\u31f0" <= ch <= "\u31ff" or "\uff66" <= ch <= "\uff9f"


def widened_bytes(ch: str) -> int:
    """Bytes one (clean) character takes in OpenJTalk's input buffer."""
    if ch < "\x80":
        return 3 if " " <= ch <= "~" else 0
    return len(ch.encode("utf-8"))


def _piece_end(text: str, start: int) -> int:
    """End of the longest piece from ``start`` that OpenJTalk can take in one call."""
    size = run = 0
    soft: int | None = None
    for i in range(start, len(text)):
        ch = text[i]
        run = run + 1 if is_kana(ch) else 0
        if run > MAX_KANA_RUN:
            return i
        size += widened_bytes(ch)
        if size > MAX_PIECE_BYTES:
            return soft if soft is not None and soft - start > (i - start) // 2 else i
        if ch in _SOFT_BREAKS:
            soft = i + 1
    return len(text)


def pieces(text: str) -> list[str]:
    """``text`` cleaned and cut into pieces OpenJTalk can analyse (one piece if it fits)."""
    text = clean(text)
    out: list[str] = []
    start = 0
    while start < len(text):
        end = _piece_end(text, start)
        out.append(text[start:end])
        start = end
    return out


def analyse(piece: str) -> Features:
    """The G2P: pyopenjtalk-plus's analysis of one piece of clean text, then our corrections.

    いう in という, こういう … is said ユー, as in speech; the corrections of
    :mod:`.corrections` follow.  Its Sudachi pass over words with several
    readings is off: it read no more of JSUT's sentences right (90.9 % without,
    90.8 % with), misread some (風が フウガ) and holds about 120 MB more
    memory.  Only for text within the limits (see :func:`pieces`);
    :func:`run_frontend` takes any text.
    """
    with _calls:
        features, morphs = pyopenjtalk.run_frontend_detailed(
            piece, iu_pronunciation=IU_PRONUNCIATION, use_sudachi_kanji_yomi=False, jtalk=current_analyser()
        )
    words = cast(Features, features)
    return corrections.correct(words, corrections.lexical_accents(words, cast(Any, morphs)))


def run_frontend(text: str) -> Features:
    """The analysis of ``text`` (see :func:`analyse`), piece by piece (see :func:`pieces`)."""
    return [node for piece in pieces(text) for node in analyse(piece)]


def make_label(features: Features) -> list[str]:
    """Full-context labels of ``features`` in one call (within MAX_LABEL_MORAE; see :func:`label_groups`)."""
    with _calls:
        return pyopenjtalk.make_label(cast(Any, features), jtalk=current_analyser())


def label_groups(features: Features) -> list[list[str]]:
    """Full-context labels of ``features``, made for groups of at most MAX_LABEL_MORAE morae.

    Each group's labels start and end in silence, as those of a whole
    utterance do.  Features of up to that many morae are one group.
    """
    groups: list[Features] = [[]]
    morae = 0
    for node in features:
        weight = max(int(node.get("mora_size", 0)), 1)
        if groups[-1] and morae + weight > MAX_LABEL_MORAE:
            groups.append([])
            morae = 0
        groups[-1].append(node)
        morae += weight
    return [make_label(group) for group in groups if group]


def system_dictionary_dir() -> str:
    """The folder of OpenJTalk's own dictionary (shipped inside the package)."""
    folder = pyopenjtalk.OPEN_JTALK_DICT_DIR
    return folder.decode() if isinstance(folder, bytes) else folder


def check_dictionary_source(csv_text: str) -> None:
    """Raise UserDictionaryError if a user dictionary source has a line or field OpenJTalk cannot take."""
    for number, line in enumerate(csv_text.splitlines(), 1):
        if len(line.encode("utf-8")) > MAX_DICTIONARY_LINE_BYTES:
            raise UserDictionaryError(f"user dictionary line {number} is longer than {MAX_DICTIONARY_LINE_BYTES} bytes")
        if any(len(field.encode("utf-8")) > MAX_DICTIONARY_FIELD_BYTES for field in line.split(",")):
            raise UserDictionaryError(
                f"user dictionary line {number} has a field longer than {MAX_DICTIONARY_FIELD_BYTES} bytes"
            )


def compile_user_dictionary(csv_path: Path, dic_path: Path) -> None:
    """``mecab_dict_index``: compile a checked dictionary source (see :func:`check_dictionary_source`).

    Raises:
        UserDictionaryError: a line or field is too long.
        RuntimeError: MeCab could not compile it.
    """
    check_dictionary_source(csv_path.read_text(encoding="utf-8"))
    pyopenjtalk.mecab_dict_index(str(csv_path), str(dic_path))


def make_analyser(dic_path: Path | None) -> Analyser:
    """An OpenJTalk with the compiled user dictionary ``dic_path`` (None: its own dictionary only), not yet in use.

    The user dictionary's readings are protected: pyopenjtalk-plus's reading
    fixes after the analysis leave the words it gives alone.
    """
    dictionary = pyopenjtalk.OPEN_JTALK_DICT_DIR
    if dic_path is None:
        return pyopenjtalk.OpenJTalk(dn_mecab=dictionary)
    return pyopenjtalk.OpenJTalk(
        dn_mecab=dictionary, userdic=str(dic_path).encode("utf-8"), userdic_reading_protection=[True]
    )


_analyser: Analyser | None = None
# One call at a time (as pyopenjtalk's own global OpenJTalk did before): the
# reading fixes after the analysis share one Sudachi tokenizer and one model.
_calls = threading.RLock()


def current_analyser() -> Analyser:
    """The OpenJTalk every analysis uses now (OpenJTalk's own dictionary until another is put in use)."""
    global _analyser
    with _calls:
        if _analyser is None:
            _analyser = make_analyser(None)
        return _analyser


def use_analyser(analyser: Analyser) -> None:
    """Make every later analysis use ``analyser`` (an analysis under way finishes with the one it had).

    Only :class:`.state.TextState` calls this: it also swaps the readings
    cached with the dictionary used before.
    """
    global _analyser
    with _calls:
        _analyser = analyser


__all__ = [
    "IU_PRONUNCIATION",
    "MAX_KANA_RUN",
    "MAX_LABEL_MORAE",
    "MAX_PIECE_BYTES",
    "analyse",
    "check_dictionary_source",
    "clean",
    "compile_user_dictionary",
    "current_analyser",
    "is_kana",
    "label_groups",
    "make_analyser",
    "make_label",
    "pieces",
    "run_frontend",
    "system_dictionary_dir",
    "use_analyser",
    "widened_bytes",
]
