"""The one file the page may change: the user dictionary, saved atomically and applied to the running server.

Every method that parses, compiles or applies runs on the inference worker
(the page's requests go through a lane), so no synthesis step ever runs
while the dictionary is being switched: a Wyoming request reads the old
way or the new way, never half of each.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..engine.engine import Engine, KeptWords
from ..text.errors import UserDictionaryError
from ..text.state import STATE, Lexicon
from ..text.user_dictionary import (
    DictionaryEntry,
    UserDictionary,
    check_entry,
    duplicate_problem,
    parse_user_dictionary,
)

_LOGGER = logging.getLogger(__name__)

T = TypeVar("T")

_HEADER = "# surface, reading, accent (optional), priority (optional); saved by the HayaKoe page\n"


@dataclass(frozen=True)
class EntryProblem:
    """A field of one entry (by its place in the list) that the file format does not accept."""

    index: int
    field: str
    message: str


@dataclass(frozen=True)
class RawEntry:
    """An entry as the page sends it, its fields as the file would have them (text)."""

    surface: str
    reading: str
    accent: str
    priority: str


def check_entries(
    entries: Sequence[RawEntry | None], problems: Sequence[EntryProblem] = ()
) -> tuple[list[DictionaryEntry], list[EntryProblem]]:
    """The entries by the file's own rules, or every problem (duplicates and the `problems` of those that are None too)."""
    checked: list[DictionaryEntry] = []
    problems = list(problems)
    seen: dict[str, int] = {}
    for index, raw in enumerate(entries):
        if raw is None:
            continue
        entry, found = check_entry(raw.surface, raw.reading, raw.accent, raw.priority, line=index + 1)
        if entry is not None:
            duplicate = duplicate_problem(entry, seen, index + 1)
            found = [duplicate] if duplicate else []
        problems.extend(EntryProblem(index, p.field, p.message.replace(" on line ", " as entry ")) for p in found)
        if entry is not None and not found:
            checked.append(entry)
    problems.sort(key=lambda p: p.index)
    return checked, problems


class DictionaryFile:
    """The user dictionary file (`--dictionary`), or none; see the module docstring."""

    def __init__(self, path: Path | None, engine: Engine) -> None:
        self.path = path.absolute() if path is not None else None
        self.engine = engine

    @property
    def writable(self) -> bool:
        """Whether a save can work: the folder takes a new file, and an existing file is not read-only."""
        if self.path is None:
            return False
        if self.path.exists() and not os.access(self.path, os.W_OK):
            return False
        return self.path.parent.is_dir() and os.access(self.path.parent, os.W_OK | os.X_OK)

    def entries(self) -> list[DictionaryEntry]:
        """What the file holds now (none if there is no file yet). Raises UserDictionaryError."""
        if self.path is None or not self.path.exists():
            return []
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise UserDictionaryError(f"cannot read the user dictionary {str(self.path)!r}: {err}") from None
        return parse_user_dictionary(text, str(self.path)).entries

    def save(self, entries: list[DictionaryEntry]) -> None:
        """Write the file atomically (the previous one kept as `.bak`), then use it from the next request on.

        The dictionary is compiled first, so a save that cannot be applied
        leaves the file as it was. Raises OSError or UserDictionaryError.
        """
        if self.path is None:
            raise UserDictionaryError("no user dictionary file is configured (--dictionary)")
        dictionary = UserDictionary(entries, str(self.path))
        lexicon = dictionary.lexicon()
        text = _HEADER + "".join(entry.as_line() + "\n" for entry in entries)
        if self.path.exists():
            _write_atomically(self.path.with_name(self.path.name + ".bak"), self.path.read_bytes())
        _write_atomically(self.path, text.encode("utf-8"))
        STATE.use(lexicon)
        self.engine.keep_words(KeptWords.of(dictionary.keep_words))
        _LOGGER.info("User dictionary %s saved and applied (%d words)", self.path, len(entries))

    def trial(self, entry: DictionaryEntry) -> Trial:
        """The dictionary as it would be with `entry` added (replacing one of the same surface), not in use."""
        try:
            current = [e for e in self.entries() if e.key != entry.key]
        except UserDictionaryError as err:  # a file broken by hand: try the entry on its own
            _LOGGER.warning("Trying an entry without the current dictionary: %s", err)
            current = []
        dictionary = UserDictionary([*current, entry], "the entry being tried")
        return Trial(self.engine, dictionary.lexicon(), KeptWords.of(dictionary.keep_words))


class Trial:
    """Steps run as if a candidate dictionary were in use, the one in use restored after each."""

    def __init__(self, engine: Engine, lexicon: Lexicon, kept: KeptWords) -> None:
        self.engine = engine
        self.lexicon = lexicon
        self.kept = kept

    def run(self, step: Callable[[], T]) -> T:
        """`step` with the candidate dictionary (on the worker: no other step can see it)."""
        with STATE.lent(self.lexicon):
            saved = self.engine.kept_words
            self.engine.keep_words(self.kept)
            try:
                return step()
            finally:
                self.engine.keep_words(saved)


def _write_atomically(path: Path, data: bytes) -> None:
    """`data` to `path` by a temporary file in the same folder renamed over it."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if path.exists():
            with suppress(OSError):  # keep the old file's permissions
                os.chmod(temporary, path.stat().st_mode & 0o7777)
        else:
            os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
