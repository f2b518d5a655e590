"""Streamed text (LLM token deltas): sentences as they complete, where not to cut, rewriting in order.

:func:`safe_to_split` tells the segmenter where a cut would break a token
the reader must see whole; :class:`StreamRewriter` rewrites one stream's
sentences in order, remembering an open code fence across them.

`SentenceStream.feed()` takes text in arbitrary pieces and returns each
sentence as soon as it is certainly complete; `finish()` returns the rest.
A sentence ends:

- after Japanese enders `。！？｡` or ASCII `!?`, together with any run of
  further enders, dots and closing brackets/quotes that follow (`！？」`);
- after an ASCII or full-width full stop (`.`/`．`) followed by whitespace or
  a non-Latin character, so `3.14`, `e.g.` inside words and `example.com` do
  not split;
- at a line break.

An ender at the very end of the text received so far is held back until the
next character shows whether a closer follows (or until `finish()`).

Runaway sentences are capped: a sentence longer than `max_length` characters
is cut at its last comma, colon or space within the limit (a hard cut if it
has none), so one endless sentence cannot delay the first audio or overflow
the models.

Pieces without a spoken character (only symbols, emoji, stray punctuation)
are not sentences of their own: they are put in front of the next sentence,
and dropped at the end if something was already spoken.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..hayakoe.sentences import CanSplit, cut_position, has_speech
from .english import ABBREVIATION_RE
from .markup import drop_fenced_code

_STRONG_ENDERS = frozenset("。！？｡!?")
_FULL_STOPS = frozenset(".．")
_CLOSERS = frozenset("」』）)］]｝}】〕〉》≫〙〗〛”’\"'＞>")
# What may follow an ender and still belong to the same sentence end.
_TRAILERS = _STRONG_ENDERS | _FULL_STOPS | _CLOSERS | frozenset("…‥")
_MAX_CARRY = 32


def _is_latin_or_digit(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


class SentenceStream:
    """Feed text deltas, get complete sentences back in order."""

    def __init__(self, max_length: int, can_split: CanSplit | None = None) -> None:
        if max_length < 10:
            raise ValueError("max_length must be at least 10")
        self.max_length = max_length
        self.can_split = can_split
        self._pending = ""
        self._carry = ""  # unspoken text waiting to be put in front of the next sentence
        self._spoken = False

    def feed(self, text: str) -> list[str]:
        """Add a piece of text; return the sentences it completed."""
        self._pending += text
        return self._drain(final=False)

    def finish(self) -> list[str]:
        """End of text: return every remaining sentence."""
        sentences = self._drain(final=True)
        sentences += self._emit(self._pending)
        self._pending = ""
        if self._carry and not self._spoken:
            # Nothing speakable came at all: hand it over anyway, so the
            # caller can tell "unpronounceable" from "empty".
            sentences.append(self._carry)
        self._carry = ""
        return sentences

    # -- internals -----------------------------------------------------------

    def _drain(self, final: bool) -> list[str]:
        out: list[str] = []
        while True:
            end = self._boundary(self._pending, final)
            if end is None:
                break
            out += self._emit(self._pending[:end])
            self._pending = self._pending[end:]
        # A tail without any boundary yet: cap it.
        while len(self._pending) > self.max_length:
            cut = cut_position(self._pending, self.max_length, self.can_split)
            out += self._emit(self._pending[:cut])
            self._pending = self._pending[cut:]
        return out

    def _boundary(self, text: str, final: bool) -> int | None:
        """End index of the first complete sentence in `text`, or None."""
        i = 0
        n = len(text)
        while i < n:
            ch = text[i]
            end: int | None = None
            if ch in "\r\n":
                end = i + 1
            elif ch in _STRONG_ENDERS or ch in _FULL_STOPS:
                j = i + 1
                while j < n and text[j] in _TRAILERS:
                    j += 1
                if j == n:
                    return n if final else None  # a closer may still come
                if ch in _FULL_STOPS and j - i == 1 and (_is_latin_or_digit(text[j]) or text[j] in ",;:-_/@%"):
                    i = j  # 3.14, example.com, e.g.x
                    continue
                end = j
            if end is not None:
                if self.can_split is None or self.can_split(text, end):
                    return end
                i = end  # not here (inside a number, a URL, code…): look further
                continue
            i += 1
        return None

    def _emit(self, piece: str) -> list[str]:
        """Strip, cap and attach unspoken pieces to the next sentence."""
        out: list[str] = []
        piece = piece.strip()
        while piece:
            if len(piece) > self.max_length:
                cut = cut_position(piece, self.max_length, self.can_split)
                head, piece = piece[:cut].strip(), piece[cut:].strip()
            else:
                head, piece = piece, ""
            if not head:
                continue
            if has_speech(head):
                out.append(self._carry + head)
                self._carry = ""
                self._spoken = True
            elif out:
                out[-1] += head  # trailing symbols belong to the sentence before
            else:
                # Keep a little of it for the next sentence (an opening
                # bracket, say); symbols alone are never spoken anyway.
                self._carry = (self._carry + head)[-_MAX_CARRY:]
        return out


class StreamRewriter:
    """Rewrites the sentences of one stream in order, remembering an open code fence.

    A fenced code block longer than the segmenter's sentence cap arrives in
    several pieces; the pieces inside the fence are dropped.
    """

    def __init__(self, rewrite: Callable[[str], str]) -> None:
        self.rewrite = rewrite
        self.in_fence = False

    def __call__(self, sentence: str) -> str:
        kept, self.in_fence = drop_fenced_code(sentence, self.in_fence)
        return self.rewrite(kept)


_ABBREVIATION_END_RE = re.compile("(?:" + ABBREVIATION_RE.pattern.removesuffix(r"[ \t]*") + ")$", re.IGNORECASE)
_URL_START_RE = re.compile(r"(?:https?://|ftp://|www\.)", re.IGNORECASE)
_URL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'*+,;=%")


def safe_to_split(buffer: str, index: int) -> bool:
    """May a sentence segmenter cut ``buffer`` into ``buffer[:index]`` and ``buffer[index:]``?

    False when the cut would break something the reader must see whole:

    * a number: ``23.5``, ``1,500``, ``7:30`` (a ``. , :`` right after a
      digit, when the next character is a digit or has not arrived yet);
    * an ordered-list marker (``1.`` at the start of a line);
    * the full stop of an abbreviation (``ver. 2``, ``Mr. Smith``) within a line;
    * a URL (from ``http://``/``www.`` to the next blank);
    * an open inline code span or fenced code block;
    * an open markdown link (``[text]`` not yet followed by ``(url)``).

    ``index == len(buffer)`` means "cut at the end of what arrived so far";
    when the answer depends on text still to come, it is False.
    """
    if index <= 0 or index > len(buffer):
        return index == 0
    before = buffer[:index]
    after = buffer[index:]
    prev = before[-1]
    # Numbers: 23.5, 1,500, 7:30 — and a digit ending the buffer may continue.
    if prev in ".．,:：" and len(before) >= 2 and before[-2].isdigit():
        if not after or after[0].isdigit():
            return False
        line_start = before.rfind("\n") + 1
        if prev in ".．" and re.fullmatch(r"[ \t]*\d{1,3}[.．]", before[line_start:]):
            return False  # "1." of a numbered list
    if prev.isdigit() and after[:1].isdigit():
        return False
    # The full stop of an abbreviation (ver. 2, Mr. Smith): a sentence end only at the end of a line.
    if prev == "." and _ABBREVIATION_END_RE.search(before) and after[:1] not in ("\n", "\r"):
        return False
    # A URL running up to the cut.
    for m in _URL_START_RE.finditer(before):
        tail = before[m.start() :]
        if all(ch in _URL_CHARS for ch in tail) and (not after or after[0] in _URL_CHARS):
            return False
    # Code: an odd number of fences, or of backticks on the current line.
    fences = len(re.findall(r"^[ \t]*(?:```|~~~)", before, re.MULTILINE))
    if fences % 2 == 1:
        return False
    line = before[before.rfind("\n") + 1 :]
    if line.replace("```", "").count("`") % 2 == 1:
        return False
    # An open link: [text ... or [text](url ...
    open_bracket = line.rfind("[")
    if open_bracket != -1:
        rest = line[open_bracket:]
        if "]" not in rest:
            return False
        close = rest.index("]")
        if rest[close + 1 : close + 2] == "(" and ")" not in rest[close:]:
            return False
        if close == len(rest) - 1 and not after:
            return False  # "(url)" may still come
    return True


__all__ = ["SentenceStream", "StreamRewriter", "safe_to_split"]
