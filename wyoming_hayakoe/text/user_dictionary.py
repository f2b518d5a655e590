"""User dictionary: your own readings (and accents) for names OpenJTalk gets wrong.

File format
-----------
A UTF-8 text file, one word per line; blank lines and lines starting with
``#`` are ignored.  Fields are separated by a comma or a tab::

    # surface, reading, accent (optional), priority (optional)
    Hue,        ヒュー,        1
    SwitchBot,  スイッチボット
    瑞穂,       みずほ,        0,  8
    Living Room, リビングルーム, 4

surface
    The word as it appears in the text.  Either Latin letters only
    (``SwitchBot``; spaces allowed, they are ignored) or Japanese only
    (kana, kanji, ``ー`` and ``々``).  Case matters for Latin words.  No
    digits (numbers are spelled out before the dictionary is consulted) and
    no punctuation.  At most 100 characters.
reading
    How it is said, in katakana or hiragana (``ヒュー``, ``みずほ``); at most
    100 characters.
accent
    Where the pitch falls: ``0`` for a flat word (no fall), ``n`` for a fall
    after the n-th mora (``ヒュー``: 1 is ヒ\u0305ュー).  Between 0 and the
    number of morae.  Omitted: estimated by the ``e2k`` accent model.
priority
    1–10 (default 5): how strongly the entry wins over OpenJTalk's own
    dictionary when both could split the text.

Applying a dictionary changes pyopenjtalk's global state, so it is an
explicit call, made once at start-up: ``apply_user_dictionary(path)``.  It
goes through :data:`.state.STATE`, which also drops the readings cached
with the dictionary used before.
The dictionary is compiled with pyopenjtalk's ``mecab_dict_index`` into a
temporary directory kept for the life of the process.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import re
import shutil
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from .errors import UserDictionaryError
from .state import STATE

logger = logging.getLogger(__name__)

DEFAULT_PRIORITY = 5
#: MeCab word cost at priority 1 and 10 (lower cost is preferred).
_COST_AT_LOWEST = 8000
_COST_AT_HIGHEST = -4000
#: Context id of 名詞,固有名詞,一般 in the bundled dictionary, used if its
#: left-id.def cannot be read.
_PROPER_NOUN_ID = 1348
_PROPER_NOUN_POS = "名詞,固有名詞,一般,*,*,*,*"

_SMALL_KANA = frozenset("ァィゥェォャュョヮヵヶ")
_KATAKANA_RE = re.compile(r"[ァ-ヴー]+")
_LATIN_SURFACE_RE = re.compile(r"[A-Za-z]+(?: [A-Za-z]+)*")
_JAPANESE_SURFACE_RE = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u30fc\u4e00-\u9fff\u3400-\u4dbf々〆ヶ]+")
_FIELD_SPLIT_RE = re.compile(r"\t|,")
#: Longest surface and reading: far beyond any real word, and well within
#: what OpenJTalk can hold in one word (see openjtalk.py).
MAX_SURFACE_CHARS = 100
MAX_READING_CHARS = 100


@dataclass(frozen=True)
class DictionaryEntry:
    """One word of a user dictionary."""

    surface: str
    reading: str
    accent: int
    priority: int = DEFAULT_PRIORITY
    line: int = 0

    @property
    def key(self) -> str:
        """The surface as OpenJTalk will see it (spaces removed)."""
        return self.surface.replace(" ", "")

    @property
    def is_latin(self) -> bool:
        return self.surface.isascii()

    @property
    def morae(self) -> int:
        return count_morae(self.reading)

    @property
    def cost(self) -> int:
        step = (_COST_AT_LOWEST - _COST_AT_HIGHEST) / 9
        return round(_COST_AT_LOWEST - (self.priority - 1) * step)


def count_morae(reading: str) -> int:
    """Morae of a katakana reading: small ャュョァィゥェォ join the mora before."""
    return sum(1 for ch in reading if ch not in _SMALL_KANA)


def to_katakana(text: str) -> str:
    """Hiragana → katakana (other characters unchanged)."""
    return "".join(chr(ord(ch) + 0x60) if "\u3041" <= ch <= "\u3096" else ch for ch in text)


def _check_surface(surface: str) -> str | None:
    if not surface:
        return "the surface (first field) is empty"
    if len(surface) > MAX_SURFACE_CHARS:
        return f"the surface is {len(surface)} characters long; at most {MAX_SURFACE_CHARS}"
    if any(ch.isdigit() for ch in surface):
        return f"surface {surface!r} contains a digit; numbers are spelled out before the dictionary is used, so it would never match"
    if surface.isascii():
        if not _LATIN_SURFACE_RE.fullmatch(surface):
            return f"surface {surface!r}: a Latin surface may contain only letters A-Z/a-z and single spaces"
        return None
    if not _JAPANESE_SURFACE_RE.fullmatch(surface):
        bad = sorted({ch for ch in surface if not _JAPANESE_SURFACE_RE.fullmatch(ch)})
        return (
            f"surface {surface!r} contains {''.join(bad)!r}; a surface is either Latin letters only "
            "or Japanese only (kana, kanji, ー, 々), without punctuation"
        )
    return None


def _check_reading(reading: str) -> str | None:
    if not reading:
        return "the reading (second field) is empty"
    if len(reading) > MAX_READING_CHARS:
        return f"the reading is {len(reading)} characters long; at most {MAX_READING_CHARS}"
    if not _KATAKANA_RE.fullmatch(reading):
        bad = sorted({ch for ch in reading if not _KATAKANA_RE.fullmatch(ch)})
        return f"reading {reading!r} must be katakana or hiragana only (found {''.join(bad)!r})"
    if reading[0] in _SMALL_KANA or reading[0] in "ッー":
        return f"reading {reading!r} cannot start with {reading[0]!r}"
    return None


def _guess_accent(reading: str) -> int:
    accent = int(STATE.accent_predictor()(reading))
    return min(max(accent, 0), count_morae(reading))


def parse_user_dictionary(text: str, source: str = "<dictionary>") -> UserDictionary:
    """Parse dictionary text (see the module docstring for the format).

    Raises:
        UserDictionaryError: listing every bad line as ``source:line: problem``.
    """
    entries: list[DictionaryEntry] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip().lstrip("\ufeff")
        if not line or line.startswith("#"):
            continue
        fields = [unicodedata.normalize("NFKC", f).strip() for f in _FIELD_SPLIT_RE.split(line)]
        fields = [re.sub(r"\s+", " ", f) for f in fields]
        while len(fields) > 2 and fields[-1] == "":
            fields.pop()
        where = f"{source}:{number}"
        if len(fields) < 2:
            errors.append(f"{where}: expected 'surface, reading[, accent[, priority]]', got {raw.strip()!r}")
            continue
        if len(fields) > 4:
            errors.append(f"{where}: too many fields ({len(fields)}; at most 4: surface, reading, accent, priority)")
            continue
        surface, reading = fields[0], to_katakana(fields[1].replace(" ", ""))
        problem = _check_surface(surface) or _check_reading(reading)
        if problem:
            errors.append(f"{where}: {problem}")
            continue
        morae = count_morae(reading)
        if len(fields) > 2 and fields[2] != "":
            if not re.fullmatch(r"\d+", fields[2]):
                errors.append(f"{where}: accent {fields[2]!r} must be a whole number from 0 to {morae}")
                continue
            accent = int(fields[2])
            if accent > morae:
                errors.append(
                    f"{where}: accent {accent} is past the end of {reading!r} ({morae} morae); use 0 to {morae}"
                )
                continue
        else:
            accent = _guess_accent(reading)
        priority = DEFAULT_PRIORITY
        if len(fields) > 3 and fields[3] != "":
            if not re.fullmatch(r"\d+", fields[3]) or not 1 <= int(fields[3]) <= 10:
                errors.append(f"{where}: priority {fields[3]!r} must be a whole number from 1 to 10")
                continue
            priority = int(fields[3])
        entry = DictionaryEntry(surface, reading, accent, priority, number)
        if entry.key in seen:
            errors.append(f"{where}: {surface!r} is already defined on line {seen[entry.key]}")
            continue
        seen[entry.key] = number
        entries.append(entry)
    if errors:
        raise UserDictionaryError(f"{len(errors)} problem(s) in the user dictionary:\n" + "\n".join(errors))
    return UserDictionary(entries, source)


def apply_user_dictionary(path: str | Path | None) -> list[str]:
    """Load and apply the dictionary at `path` (nothing when None); returns its Latin surfaces.

    Those surfaces must reach OpenJTalk untouched (`keep_words` of the engine
    and the Home Assistant reader). Raises UserDictionaryError for a bad file.
    """
    if path is None:
        return []
    dictionary = load_user_dictionary(path)
    dictionary.apply()
    return dictionary.keep_words


def load_user_dictionary(path: str | Path) -> UserDictionary:
    """Read and check a dictionary file.

    Raises:
        UserDictionaryError: the file cannot be read or has bad entries.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserDictionaryError(f"user dictionary {str(path)!r} does not exist") from None
    except UnicodeDecodeError as exc:
        raise UserDictionaryError(
            f"user dictionary {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise UserDictionaryError(f"cannot read user dictionary {str(path)!r}: {exc.strerror or exc}") from None
    return parse_user_dictionary(text, str(path))


def _full_width(text: str) -> str:
    """ASCII → full-width, as OpenJTalk converts its input before MeCab."""
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)


def _proper_noun_id(dict_dir: str | Path) -> int:
    try:
        for line in Path(dict_dir, "left-id.def").read_text(encoding="utf-8").splitlines():
            number, _, pos = line.partition(" ")
            if pos.strip() == _PROPER_NOUN_POS:
                return int(number)
    except (OSError, ValueError):
        pass
    return _PROPER_NOUN_ID


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what C code writes to file descriptor 1 to standard error instead."""
    try:
        stdout_fd = sys.stdout.fileno()
        stderr_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real files (captured output)
        yield
        return
    sys.stdout.flush()
    saved = os.dup(stdout_fd)
    try:
        os.dup2(stderr_fd, stdout_fd)
        yield
    finally:
        with suppress(OSError, AttributeError):  # pragma: no cover - no libc symbol table
            ctypes.CDLL(None).fflush(None)
        os.dup2(saved, stdout_fd)
        os.close(saved)


class UserDictionary:
    """Checked dictionary entries, ready to be compiled and applied."""

    def __init__(self, entries: Iterable[DictionaryEntry], source: str = "<dictionary>") -> None:
        self.entries = list(entries)
        self.source = source
        self._compiled_dir: str | None = None

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def keep_words(self) -> list[str]:
        """Surfaces (as written) that the text rewrite must leave alone."""
        return [e.surface for e in self.entries if e.is_latin]

    @property
    def normalizer_keep_words(self) -> list[str]:
        """Latin surfaces as the normaliser sees them (spaces removed)."""
        return [e.key for e in self.entries if e.is_latin]

    def mecab_csv(self, context_id: int = _PROPER_NOUN_ID) -> str:
        """The entries as rows of a MeCab/OpenJTalk dictionary source (CSV)."""
        rows = []
        for e in self.entries:
            surface = _full_width(e.key)
            rows.append(
                f"{surface},{context_id},{context_id},{e.cost},名詞,固有名詞,一般,*,*,*,"
                f"{surface},{e.reading},{e.reading},{e.accent}/{e.morae},*\n"
            )
        return "".join(rows)

    def compile(self, out_dir: str | Path) -> Path:
        """Write ``user.csv`` and compile it to ``user.dic`` in ``out_dir``."""
        from . import openjtalk

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        csv_path = out_dir / "user.csv"
        dic_path = out_dir / "user.dic"
        csv_path.write_text(self.mecab_csv(_proper_noun_id(openjtalk.system_dictionary_dir())), encoding="utf-8")
        try:
            with _stdout_to_stderr():  # mecab_dict_index reports progress on stdout
                openjtalk.compile_user_dictionary(csv_path, dic_path)
        except (RuntimeError, ValueError) as exc:
            raise UserDictionaryError(f"cannot compile user dictionary {self.source!r}: {exc}") from None
        return dic_path

    def apply(self) -> None:
        """Compile and install into pyopenjtalk's global OpenJTalk (global state, see :mod:`.state`)."""
        if not self.entries:
            logger.info("User dictionary %s is empty; nothing to apply", self.source)
            return
        if self._compiled_dir is None:
            self._compiled_dir = tempfile.mkdtemp(prefix="wyoming-hayakoe-dict-")
            atexit.register(shutil.rmtree, self._compiled_dir, True)
        dic_path = self.compile(self._compiled_dir)
        STATE.use_user_dictionary(dic_path)
        logger.info("Applied user dictionary %s (%d words)", self.source, len(self.entries))


__all__ = [
    "DEFAULT_PRIORITY",
    "MAX_READING_CHARS",
    "MAX_SURFACE_CHARS",
    "DictionaryEntry",
    "UserDictionary",
    "UserDictionaryError",
    "count_morae",
    "load_user_dictionary",
    "parse_user_dictionary",
    "to_katakana",
]
