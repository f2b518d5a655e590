"""The Home Assistant reader: every rewrite in order, and the katakana it will speak."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .. import openjtalk
from ..hayakoe.normalize import normalize_text
from ..hayakoe.sentences import split_sentences
from .english import EnglishReader, sub_abbreviations, sub_english
from .japanese import sub_japanese
from .markup import strip_markup, sub_symbols
from .numbers import roman_to_arabic
from .quantities import sub_number_signs, sub_numbers
from .stream import StreamRewriter
from .times import sub_dates_and_times

#: What makes a text need rewriting: digits and Latin letters (both widths),
#: markdown characters, strikethrough and horizontal rules.  Text without any
#: of them only gets the Japanese misreading fixes.  (Emoji and symbols alone
#: need nothing: the normaliser drops them anyway.)
_TRIGGER_RE = re.compile(
    r"[0-9A-Za-z\uff10-\uff19\uff21-\uff3a\uff41-\uff5a*_`#|<>\[\]]|~~|^[ \t]*[-=]{3,}[ \t]*$",
    re.MULTILINE,
)


def needs_rewrite(text: str) -> bool:
    """True if :meth:`HomeAssistantReader.rewrite` may change ``text``."""
    return _has_markup_or_latin(text) or sub_japanese(text) != text


def _has_markup_or_latin(text: str) -> bool:
    if _TRIGGER_RE.search(text) is not None:
        return True
    return not text.isascii() and _TRIGGER_RE.search(unicodedata.normalize("NFKC", text)) is not None


_PLACEHOLDER_BASE = 0xF0000  # supplementary private use area A


class HomeAssistantReader:
    """Rewrites Home Assistant / LLM text into plain Japanese for the normaliser.

    Args:
        keep_words: Latin surfaces that must reach OpenJTalk untouched
            (user dictionary entries), so the user's reading wins.  They are
            passed on with their spaces removed (``Living Room`` →
            ``LivingRoom``), as the dictionary stores them.
        extra_readings: more word → katakana readings for English words.
    """

    def __init__(self, keep_words: Iterable[str] = (), extra_readings: dict[str, str] | None = None) -> None:
        self.english = EnglishReader(extra_readings)
        self.keep_words = sorted(
            {unicodedata.normalize("NFKC", w).strip() for w in keep_words if w and w.strip()}, key=len, reverse=True
        )
        self._keep_re = (
            re.compile(
                r"(?<![A-Za-z])(?:"
                + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in self.keep_words)
                + r")(?![A-Za-z])"
            )
            if self.keep_words
            else None
        )
        # Multi-word and symbol-bearing table entries are matched as phrases
        # before single words (Apple TV, Wi-Fi, PM2.5).
        phrases = [p for p in self.english.phrases if not re.fullmatch(r"[A-Za-z]+", p)]
        self._phrase_re = re.compile(
            r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(p) for p in phrases) + r")(?![A-Za-z0-9])",
            re.IGNORECASE,
        )

    def rewrite(self, text: str) -> str:
        """Plain Japanese for ``text`` (unchanged if there is nothing to rewrite)."""
        if not _has_markup_or_latin(text):
            return sub_japanese(text)
        text = unicodedata.normalize("NFKC", roman_to_arabic(text))
        text = sub_number_signs(text)
        kept: list[str] = []
        if self._keep_re is not None:

            def keep(m: re.Match[str]) -> str:
                kept.append(re.sub(r"\s+", "", m.group(0)))
                return chr(_PLACEHOLDER_BASE + len(kept) - 1)

            text = self._keep_re.sub(keep, text)
        text = strip_markup(sub_abbreviations(text))
        text = self._phrase_re.sub(self._phrase, text)
        text = sub_dates_and_times(text)
        text = sub_numbers(text)
        text = sub_english(text, self.english)
        text = sub_japanese(text)
        text = sub_symbols(text)
        if kept:
            text = re.sub("[\U000f0000-\U000fffff]", lambda m: kept[ord(m.group(0)) - _PLACEHOLDER_BASE], text)
        return text.strip(" \t")

    def _phrase(self, m: re.Match[str]) -> str:
        found = m.group(0)
        if any(ch.isdigit() for ch in found):  # 5G, 4K: the case matters
            return self.english.exact(found) or found
        return self.english.table(found) or found

    def stream(self) -> StreamRewriter:
        """A rewriter for the sentences of one streamed text (see :class:`StreamRewriter`)."""
        return StreamRewriter(self.rewrite)


_PUNCTUATION_READING = {"，": "、", "．": "。", "！": "！", "？": "？", "、": "、", "。": "。"}


def katakana_reading(
    text: str,
    reader: HomeAssistantReader | None = None,
    keep_words: Iterable[str] = (),
    *,
    punctuation: bool = True,
) -> str:
    """The katakana pronunciation the synthesiser will speak for ``text``.

    Runs the Home Assistant rewrite, the HayaKoe-compatible normaliser and
    OpenJTalk, sentence by sentence like the engine, and joins each word's
    pronunciation (accent marks removed).  Pauses show as ``、``, sentence
    ends as ``。`` (or ``？ ！``), unless ``punctuation`` is False.
    """
    reader = reader or HomeAssistantReader(keep_words)
    keep = [re.sub(r"\s+", "", w) for w in (list(keep_words) or reader.keep_words)]
    out: list[str] = []
    for sentence in split_sentences(reader.rewrite(text)):
        normalized = normalize_text(sentence, keep)
        if not normalized:
            continue
        if punctuation and out and out[-1] not in "、。！？":
            out.append("。")
        for node in openjtalk.run_frontend(normalized):
            if node["pos"] == "記号":
                mark = _PUNCTUATION_READING.get(node["string"], "")
                if punctuation and mark and not (out and out[-1] in "、。！？"):
                    out.append(mark)
                continue
            out.append(node["pron"].replace("’", ""))
    reading = "".join(out).lstrip("、。")
    return reading


__all__ = ["HomeAssistantReader", "katakana_reading", "needs_rewrite"]
