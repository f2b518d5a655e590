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

Applying a dictionary changes the text layer's global state, so it is an
explicit call: ``apply_user_dictionary(path)`` at start-up, or
:meth:`UserDictionary.apply` to replace the dictionary in use (a web page
saving its edits).  It goes through :data:`.state.STATE`, which also drops
the readings cached with the dictionary used before.
The dictionary is compiled with pyopenjtalk's ``mecab_dict_index`` into a
temporary directory, removed once OpenJTalk has loaded it.
"""

from __future__ import annotations

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
from .state import STATE, Lexicon

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
    estimated: bool = False  # the accent was not given: e2k's estimate

    def as_line(self) -> str:
        """The entry as a line of a dictionary file (an estimated accent is left for the next reader to estimate)."""
        fields = [self.surface, self.reading, "" if self.estimated else str(self.accent), str(self.priority)]
        if self.priority == DEFAULT_PRIORITY:
            fields.pop()
            if self.estimated:
                fields.pop()
        return ", ".join(fields)

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


#: The fields of an entry, as :class:`FieldProblem` names them.
FIELDS = ("surface", "reading", "accent", "priority")


@dataclass(frozen=True)
class FieldProblem:
    """Why one field of an entry cannot be used."""

    field: str  # one of FIELDS
    message: str


def clean_field(text: str) -> str:
    """A field as the file format reads it: NFKC, trimmed, runs of white space as one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).strip())


def check_entry(
    surface: str, reading: str, accent: str = "", priority: str = "", line: int = 0
) -> tuple[DictionaryEntry | None, list[FieldProblem]]:
    """One entry from its fields as text (accent and priority may be empty), or what is wrong with each field.

    The file's rules: every problem found is listed, the entry only when there is none.
    """
    surface, reading, accent, priority = (clean_field(f) for f in (surface, reading, accent, priority))
    reading = to_katakana(reading.replace(" ", ""))
    problems = [
        FieldProblem(name, message)
        for name, message in (("surface", _check_surface(surface)), ("reading", _check_reading(reading)))
        if message
    ]
    morae = count_morae(reading)
    value: int | None = None
    if accent != "":
        if not re.fullmatch(r"\d+", accent):
            problems.append(FieldProblem("accent", f"accent {accent!r} must be a whole number from 0 to {morae}"))
        elif int(accent) > morae:
            problems.append(
                FieldProblem(
                    "accent", f"accent {int(accent)} is past the end of {reading!r} ({morae} morae); use 0 to {morae}"
                )
            )
        else:
            value = int(accent)
    rank = DEFAULT_PRIORITY
    if priority != "":
        if not re.fullmatch(r"\d+", priority) or not 1 <= int(priority) <= 10:
            problems.append(FieldProblem("priority", f"priority {priority!r} must be a whole number from 1 to 10"))
        else:
            rank = int(priority)
    if problems:
        return None, problems
    if value is None:
        return DictionaryEntry(surface, reading, _guess_accent(reading), rank, line, estimated=True), []
    return DictionaryEntry(surface, reading, value, rank, line), []


def duplicate_problem(entry: DictionaryEntry, seen: dict[str, int], where: int) -> FieldProblem | None:
    """The problem if ``entry`` repeats a surface already in ``seen`` (key → where); else notes it there."""
    if entry.key in seen:
        return FieldProblem("surface", f"{entry.surface!r} is already defined on line {seen[entry.key]}")
    seen[entry.key] = where
    return None


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
        fields = [clean_field(f) for f in _FIELD_SPLIT_RE.split(line)]
        while len(fields) > 2 and fields[-1] == "":
            fields.pop()
        where = f"{source}:{number}"
        if len(fields) < 2:
            errors.append(f"{where}: expected 'surface, reading[, accent[, priority]]', got {raw.strip()!r}")
            continue
        if len(fields) > 4:
            errors.append(f"{where}: too many fields ({len(fields)}; at most 4: surface, reading, accent, priority)")
            continue
        surface, reading, accent, priority = [*fields, "", ""][:4]
        entry, problems = check_entry(surface, reading, accent, priority, line=number)
        if entry is not None:
            duplicate = duplicate_problem(entry, seen, number)
            problems = [duplicate] if duplicate else []
        if problems:
            errors.append(f"{where}: {problems[0].message}")
            continue
        assert entry is not None
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
        """Compile and install into the OpenJTalk every analysis uses, in place of any before (see :mod:`.state`)."""
        with self._compiled() as dic_path:
            STATE.use_user_dictionary(dic_path)
        logger.info("Applied user dictionary %s (%d words)", self.source, len(self.entries))

    def lexicon(self) -> Lexicon:
        """The dictionary ready to be lent for a while (:meth:`.state.TextState.lent`), not in use."""
        with self._compiled() as dic_path:
            return Lexicon(dic_path)

    @contextmanager
    def _compiled(self) -> Iterator[Path | None]:
        """Compiled in a temporary folder (None when empty), removed once OpenJTalk has loaded it."""
        if not self.entries:
            yield None
            return
        folder = tempfile.mkdtemp(prefix="wyoming-hayakoe-dict-")
        try:
            yield self.compile(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


__all__ = [
    "DEFAULT_PRIORITY",
    "MAX_READING_CHARS",
    "MAX_SURFACE_CHARS",
    "FIELDS",
    "DictionaryEntry",
    "FieldProblem",
    "UserDictionary",
    "UserDictionaryError",
    "check_entry",
    "clean_field",
    "count_morae",
    "duplicate_problem",
    "load_user_dictionary",
    "parse_user_dictionary",
    "to_katakana",
]
