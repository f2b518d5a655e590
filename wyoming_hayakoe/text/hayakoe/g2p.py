"""Grapheme-to-phoneme conversion compatible with HayaKoe 1.3.1 (JP-Extra).

Input is text already passed through :func:`.normalize.normalize_text`.
The output is a phone list, a 0/1 pitch (tone) per phone and ``word2ph`` —
how many phones belong to each BERT input character — wrapped in leading
and trailing ``_``.

Two OpenJTalk views of the same text are combined:

* **Accent**: the full-context labels give phones and accent-phrase
  structure but lose all punctuation.  From them we derive, per accent
  phrase, a relative pitch that is normalised to 0/1 (low/high).
* **Words**: ``run_frontend`` keeps punctuation and gives the word split
  (used for ``word2ph`` and for the BERT input text) and each word's
  katakana reading, which is converted to phones with the mora table.

The word phones are then walked in step with the accent phones; punctuation
that only the word view has gets pitch 0.  If the two views disagree the
text cannot be voiced and :class:`UnpronounceableText` is raised — this is
exactly the set of inputs on which HayaKoe raises (``ValueError`` or
``AssertionError``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import openjtalk
from ..errors import NotKatakana, UnpronounceableText
from .mora import LONG_MARK, VOWELS, reading_to_phonemes
from .normalize import replace_punctuation
from .symbols import PAD, PUNCTUATION_SET, PUNCTUATIONS

logger = logging.getLogger(__name__)

Tokenize = Callable[[str], Sequence[str]]


@dataclass(frozen=True)
class G2PResult:
    """Phones with pitch, word2ph and the word split of one normalised text."""

    phones: list[str]
    tones: list[int]
    word2ph: list[int]
    words: list[str]

    @property
    def bert_text(self) -> str:
        """The text the BERT tokenizer sees (the words joined together)."""
        return "".join(self.words)


# --------------------------------------------------------------------------
# Accent view: full-context labels → (phone, 0/1) without punctuation
# --------------------------------------------------------------------------

# Markers in the prosody stream.
_START = "^"
_END_STATEMENT = "$"
_END_QUESTION = "?"
_PAUSE = "_"
_PHRASE_BREAK = "#"
_RISE = "["
_FALL = "]"

_UNSET = -50  # value of a label feature that is absent ("xx")
_CURRENT_PHONE_RE = re.compile(r"-(.*?)\+")
_A1_RE = re.compile(r"/A:([0-9\-]+)\+")
_A2_RE = re.compile(r"\+(\d+)\+")
_A3_RE = re.compile(r"\+(\d+)/")
_E3_RE = re.compile(r"!(\d+)_")
_F1_RE = re.compile(r"/F:(\d+)_")
# Phones that may close an accent phrase (a phrase boundary is only marked
# after one of them).
_PHRASE_FINAL_PHONES = frozenset(["a", "e", "i", "o", "u", "A", "E", "I", "O", "U", "N", "cl"])
_DEVOICED_VOWELS = frozenset("AEIOU")


def _label_int(pattern: re.Pattern[str], label: str) -> int:
    found = pattern.search(label)
    return _UNSET if found is None else int(found.group(1))


def _prosody_stream(labels: Sequence[str]) -> list[str]:
    """Phones interleaved with accent markers (ESPnet-style prosody symbols).

    Devoiced vowels are reported as their voiced counterparts.
    """
    stream: list[str] = []
    last = len(labels) - 1
    for idx, label in enumerate(labels):
        found = _CURRENT_PHONE_RE.search(label)
        if found is None:
            raise UnpronounceableText(f"malformed OpenJTalk label: {label!r}")
        phone = found.group(1)
        if phone in _DEVOICED_VOWELS:
            phone = phone.lower()

        if phone == "sil":
            if idx == 0:
                stream.append(_START)
            elif idx == last:
                question = _label_int(_E3_RE, label)
                if question == 0:
                    stream.append(_END_STATEMENT)
                elif question == 1:
                    stream.append(_END_QUESTION)
            else:
                raise UnpronounceableText("silence in the middle of the utterance")
            continue
        if phone == "pau":
            stream.append(_PAUSE)
            continue
        stream.append(phone)

        if idx == last:
            # The reference reads the next label here and fails.
            raise UnpronounceableText("utterance does not end in silence")
        a1 = _label_int(_A1_RE, label)
        a2 = _label_int(_A2_RE, label)
        a3 = _label_int(_A3_RE, label)
        f1 = _label_int(_F1_RE, label)
        a2_next = _label_int(_A2_RE, labels[idx + 1])

        if a3 == 1 and a2_next == 1 and phone in _PHRASE_FINAL_PHONES:
            stream.append(_PHRASE_BREAK)
        elif a1 == 0 and a2_next == a2 + 1 and a2 != f1:
            stream.append(_FALL)
        elif a2 == 1 and a2_next == 2:
            stream.append(_RISE)
    return stream


def _binarise_phrase(phrase: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Turn one accent phrase's relative pitch into 0 (low) / 1 (high)."""
    levels = {tone for _, tone in phrase}
    if levels == {0} or levels == {0, 1}:
        return phrase
    if levels == {-1, 0}:
        return [(phone, tone + 1) for phone, tone in phrase]
    raise UnpronounceableText(f"unexpected pitch levels in an accent phrase: {sorted(levels)}")


def _accent_phones(stream: Sequence[str]) -> list[tuple[str, int]]:
    """(phone, 0/1) pairs from the prosody stream; ``っ`` becomes ``q``."""
    result: list[tuple[str, int]] = []
    phrase: list[tuple[str, int]] = []
    level = 0
    last = len(stream) - 1
    for idx, sym in enumerate(stream):
        if sym == _START:
            if idx != 0:
                raise UnpronounceableText("utterance start marker in the middle")
        elif sym in (_END_STATEMENT, _END_QUESTION, _PAUSE, _PHRASE_BREAK):
            result.extend(_binarise_phrase(phrase))
            if sym in (_END_STATEMENT, _END_QUESTION) and idx != last:
                raise UnpronounceableText("utterance end marker in the middle")
            phrase = []
            level = 0
        elif sym == _RISE:
            level += 1
        elif sym == _FALL:
            level -= 1
        else:
            phrase.append(("q" if sym == "cl" else sym, level))
    return result


# --------------------------------------------------------------------------
# Word view: run_frontend → words, readings, phones
# --------------------------------------------------------------------------


def _split_words(norm_text: str, features: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Words (punctuation-normalised surfaces) and their readings.

    Readings are katakana, or the punctuation itself for punctuation words;
    characters OpenJTalk cannot read get one ``'`` each.
    """
    words: list[str] = []
    readings: list[str] = []
    for node in features:
        word = replace_punctuation(node["string"])
        reading = node["pron"].replace("’", "")
        if not reading:
            raise UnpronounceableText(f"OpenJTalk gave no reading for {word!r}")
        if reading == "、":
            # OpenJTalk's reading for punctuation and for unknown characters.
            if all(ch in PUNCTUATION_SET for ch in word):
                reading = word
            else:
                logger.warning("Cannot read %r in %r; voicing it as a pause (')", word, norm_text)
                reading = "'" * len(word)
        elif reading == "？":
            if word != "?":
                raise UnpronounceableText(f"question-mark reading for {word!r}")
            reading = "?"
        words.append(word)
        readings.append(reading)
    return words, readings


def _resolve_long_marks(word_phones: list[list[str]]) -> None:
    """Give meaning to a ``ー`` that starts a word (in place).

    After a vowel, ``ん`` or ``っ`` it lengthens that phone; anywhere else
    (sentence start, after punctuation …) it is read as a dash ``-``.
    """
    for idx, phones in enumerate(word_phones):
        if not phones:
            continue
        if phones[0] == LONG_MARK:
            if idx > 0 and not word_phones[idx - 1]:
                # The reference fails here (it looks at the last phone of an
                # empty word).
                raise UnpronounceableText("long-vowel mark after an empty word")
            previous = word_phones[idx - 1][-1] if idx > 0 else None
            if previous is not None and (previous in VOWELS or previous == "q"):
                phones[0] = previous
            else:
                phones[0] = "-"
        for pos, phone in enumerate(phones):
            if phone == LONG_MARK:
                phones[pos] = phones[pos - 1][-1]


def _align(word_phones: Sequence[str], accent: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """Attach pitch to the word-view phones, giving punctuation pitch 0."""
    out: list[tuple[str, int]] = []
    cursor = 0
    for phone in word_phones:
        if cursor >= len(accent):
            out.append((phone, 0))
        elif phone == accent[cursor][0]:
            out.append((phone, accent[cursor][1]))
            cursor += 1
        elif phone in PUNCTUATION_SET:
            out.append((phone, 0))
        else:
            raise UnpronounceableText(
                f"phone {phone!r} does not match the accent analysis (expected {accent[cursor][0]!r})"
            )
    return out


def _share_out(n_phones: int, n_chars: int) -> list[int]:
    """Split ``n_phones`` over ``n_chars`` as evenly as possible, front-loaded."""
    if n_chars == 0:
        return []
    each, extra = divmod(n_phones, n_chars)
    return [each + 1 if i < extra else each for i in range(n_chars)]


def _word2ph(words: Sequence[str], word_phones: Sequence[Sequence[str]], tokenize: Tokenize) -> list[int]:
    counts: list[int] = []
    for word, phones in zip(words, word_phones, strict=True):
        n_chars = 1 if word in PUNCTUATIONS else len(tokenize(word))
        counts.extend(_share_out(len(phones), n_chars))
    return counts


# --------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------


def analyze(norm_text: str, tokenize: Tokenize, *, use_jp_extra: bool = True) -> G2PResult:
    """Full G2P of a normalised text (one OpenJTalk analysis, reused).

    ``tokenize`` is the BERT tokenizer's ``tokenize`` method; the number of
    tokens of each word decides over how many characters its phones are
    spread in ``word2ph``.

    Raises:
        UnpronounceableText: where HayaKoe's ``g2p`` raises.
    """
    features = openjtalk.run_frontend(norm_text)
    # One group for any sentence of normal length; a longer text gets its
    # accent phrases group by group (see openjtalk.label_groups).
    accent = [pair for labels in openjtalk.label_groups(features) for pair in _accent_phones(_prosody_stream(labels))]

    words, readings = _split_words(norm_text, features)
    try:
        word_phones = [reading_to_phonemes(r) for r in readings]
    except NotKatakana as exc:
        raise UnpronounceableText(str(exc)) from exc
    _resolve_long_marks(word_phones)

    flat = [phone for phones in word_phones for phone in phones]
    with_tones = _align(flat, accent)
    word2ph = [1, *_word2ph(words, word_phones, tokenize), 1]

    phones = [PAD, *(p for p, _ in with_tones), PAD]
    tones = [0, *(t for _, t in with_tones), 0]
    if len(phones) != sum(word2ph):
        raise UnpronounceableText(
            f"{len(phones)} phones but word2ph covers {sum(word2ph)} "
            f"(the tokenizer dropped characters of {norm_text!r})"
        )
    if not use_jp_extra:
        phones = ["n" if p == "N" else p for p in phones]
    return G2PResult(phones=phones, tones=tones, word2ph=word2ph, words=words)


__all__ = ["G2PResult", "analyze"]
