"""How right our readings and pitch accents are, against the hand-labelled JSUT basic5000 corpus.

    python tools/reading_benchmark.py PATH/TO/jsut-label [--sentences 1-2500] [--misses 30]

PATH/TO/jsut-label is a checkout of https://github.com/sarulab-speech/jsut-label
(CC-BY-SA 4.0; not shipped with this project). Its ``text_kana/basic5000.yaml``
has each sentence's text, ``e2e_symbol/phoneme.yaml`` its phonemes with the
pitch marks ``[`` (rise), ``]`` (fall) and ``#`` (accent phrase boundary).

Each text takes the path a request takes: the Home Assistant rewrite, the
engine's sentence split, then the voice's frontend (normalisation and
OpenJTalk), whose phones and 0/1 pitch are what the synthesizer gets. They are
compared with the labels:

* read right: the same phonemes, pauses left out and long vowels folded
  (``o o``, ``o u`` = ``o``), so ``トウ``, ``トー`` and ``ト`` count alike;
* phoneme and mora error rates: edit distance over the folded sequences;
* pitch: morae (and phones) aligned with the labels' and compared high/low;
  a sentence has every accent right when its morae and all their pitches match;
* the most frequent misses, as katakana: reference → ours;
* the pitch misses of the sentences read right, by accent phrase of the
  labels: we cut a phrase the labels run on, we run on across a boundary of
  theirs, or, in the same phrase, we fall too early, too late, where they are
  flat, or are flat where they fall.  ``--list-mispitched`` lists each such
  sentence, its phrases labelled and ours, a fall marked ↓.

Sentences 0001-2500 are the development half; 2501-5000 are kept back to check
that what was tuned on the first half generalises, so the default is 1-2500.
Nothing here is timed.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from wyoming_hayakoe.engine.engine import plan_text
from wyoming_hayakoe.text import Frontend, UnpronounceableText
from wyoming_hayakoe.text.hayakoe.g2p import _accent_phones
from wyoming_hayakoe.text.hayakoe.mora import MORA_TO_PHONEMES
from wyoming_hayakoe.text.hayakoe.phrases import accent_phrases
from wyoming_hayakoe.text.hayakoe.symbols import JP_TONE_OFFSET, PAD, PUNCTUATION_SET
from wyoming_hayakoe.text.rewrite import HomeAssistantReader

_KEY_RE = re.compile(r"^BASIC5000_(\d{4}):\s*(.*)$")
_FIELD_RE = re.compile(r"^\s+(\w+):\s*(.*)$")
_VOWELS = frozenset("aiueo")
_MORA_ENDS = _VOWELS | {"N", "q"}
DEVELOPMENT = (1, 2500)

#: One mora: its phones joined by spaces, and its pitch (0 low, 1 high).
Mora = tuple[str, int]


class _CharacterTokenizer:
    """One token per character: the benchmark needs phones and pitch, not BERT features."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return list(text)


def read_corpus(folder: Path, first: int, last: int) -> Iterator[tuple[int, str, str]]:
    """(number, text, labelled phonemes) of the sentences numbered first..last; other entries are skipped unread."""
    texts = _entries(folder / "text_kana" / "basic5000.yaml", first, last, "text_level0")
    labels = _entries(folder / "e2e_symbol" / "phoneme.yaml", first, last, None)
    for number in sorted(texts.keys() & labels.keys()):
        yield number, texts[number], labels[number]


def _entries(path: Path, first: int, last: int, field_name: str | None) -> dict[int, str]:
    """Values of one YAML file of the corpus, only for the numbers in range (its layout is one key per line)."""
    found: dict[int, str] = {}
    number: int | None = None
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            key = _KEY_RE.match(line)
            if key is not None:
                number = int(key.group(1))
                if not first <= number <= last:
                    number = None
                elif field_name is None:
                    found[number] = key.group(2).strip()
                continue
            value = _FIELD_RE.match(line)
            if number is not None and value is not None and value.group(1) == field_name:
                found[number] = value.group(2).strip()
    return found


def morae_of(pairs: Sequence[tuple[str, int]]) -> list[Mora]:
    """Phones with pitch → morae (a consonant joins the vowel after it; the vowel's pitch is the mora's)."""
    out: list[Mora] = []
    pending: list[str] = []
    for phone, tone in pairs:
        pending.append(phone)
        if phone in _MORA_ENDS:
            out.append((" ".join(pending), tone))
            pending = []
    if pending:
        out.append((" ".join(pending), pairs[-1][1]))
    return out


#: Second halves of a long vowel, by the vowel they lengthen: ケイ is said ケー, トウ トー.
_LENGTHENING = {"a": "a", "i": "i", "u": "u", "e": "ei", "o": "ou"}


def fold(morae: Sequence[str]) -> list[str]:
    """Long vowels folded: a bare vowel mora that lengthens the mora before it is dropped."""
    out: list[str] = []
    for mora in morae:
        if mora in _VOWELS and out and mora in _LENGTHENING.get(out[-1][-1], ""):
            continue
        out.append(mora)
    return out


def labelled(stream: str) -> tuple[list[tuple[str, int]], list[int]]:
    """The corpus's phonemes with their 0/1 pitch, derived from its marks as the frontend derives ours;
    and how many morae each of its accent phrases has."""
    # "?" marks a question (before the end or a pause): intonation, not pitch accent.
    symbols = [s if s in ("N", "cl") else s.lower() for s in stream.split("-") if s != "?"]
    sizes = [0]
    for symbol in symbols:
        if symbol in ("#", "_") and sizes[-1]:
            sizes.append(0)
        elif symbol in _MORA_ENDS or symbol == "cl":
            sizes[-1] += 1
    return list(_accent_phones(symbols)), [size for size in sizes if size]


def ours(frontend: Frontend, reader: HomeAssistantReader, text: str) -> tuple[list[tuple[str, int]], list[int], int]:
    """Our phones with pitch for ``text`` along the request's path, the mora count of each of our accent
    phrases (as the page shows them), and how many of its sentences could not be read."""
    pairs: list[tuple[str, int]] = []
    sizes: list[int] = []
    unreadable = 0
    for sentence in plan_text(reader, text).sentences:
        try:
            phonemes = frontend.phonemize(sentence)
            sizes += [len(phrase.morae) for phrase in accent_phrases(frontend.normalize(sentence))]
        except UnpronounceableText:
            unreadable += 1
            continue
        for phone, tone in zip(phonemes.phones, phonemes.tones.tolist()):
            if phone != PAD and phone not in PUNCTUATION_SET:
                pairs.append((phone.lower() if phone in "AIUEO" else phone, tone - JP_TONE_OFFSET))
    return pairs, sizes, unreadable


def _kana_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for kana, (consonant, vowel) in sorted(MORA_TO_PHONEMES.items(), key=lambda item: len(item[0])):
        table.setdefault(f"{consonant} {vowel}" if consonant else vowel, kana)
    table["q"] = "ッ"
    return table


_KANA = _kana_table()


def kana(morae: Sequence[str]) -> str:
    """Morae back in katakana, for people."""
    return "".join(_KANA.get(mora, f"[{mora}]") for mora in morae)


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def pitch_agreement(reference: Sequence[tuple[str, int]], got: Sequence[tuple[str, int]]) -> int:
    """Units of ``reference`` that line up with the same unit of ``got`` and have its pitch."""
    matcher = SequenceMatcher(None, [u for u, _ in reference], [u for u, _ in got], autojunk=False)
    return sum(
        reference[block.a + k][1] == got[block.b + k][1]
        for block in matcher.get_matching_blocks()
        for k in range(block.size)
    )


@dataclass
class Tally:
    sentences: int = 0
    read_right: int = 0
    all_pitch_right: int = 0
    unreadable: int = 0
    phonemes: int = 0
    phoneme_errors: int = 0
    morae: int = 0
    mora_errors: int = 0
    pitch_morae: int = 0
    pitch_morae_right: int = 0
    pitch_phones: int = 0
    pitch_phones_right: int = 0
    reading_misses: Counter[tuple[str, str]] = field(default_factory=Counter)
    pitch_misses: Counter[str] = field(default_factory=Counter)
    missed: list[tuple[int, str, str, str]] = field(default_factory=list)
    mispitched: list[tuple[int, str, str, str]] = field(default_factory=list)

    def add(
        self,
        number: int,
        text: str,
        reference: list[tuple[str, int]],
        got: list[tuple[str, int]],
        phrase_sizes: tuple[list[int], list[int]] = ([], []),
    ) -> None:
        """One sentence: labelled and our phones with pitch, and the mora counts of the labelled and our phrases."""
        self.sentences += 1
        ref_morae, got_morae = morae_of(reference), morae_of(got)
        ref_folded, got_folded = fold([m for m, _ in ref_morae]), fold([m for m, _ in got_morae])
        ref_phones = [p for m in ref_folded for p in m.split()]
        got_phones = [p for m in got_folded for p in m.split()]
        self.phonemes += len(ref_phones)
        self.phoneme_errors += edit_distance(ref_phones, got_phones)
        self.morae += len(ref_folded)
        self.mora_errors += edit_distance(ref_folded, got_folded)
        self.pitch_morae += len(ref_morae)
        self.pitch_morae_right += pitch_agreement(ref_morae, got_morae)
        self.pitch_phones += len(reference)
        self.pitch_phones_right += pitch_agreement(reference, got)
        if ref_folded == got_folded:
            self.read_right += 1
        else:
            self._note_reading_misses(ref_folded, got_folded)
            self.missed.append((number, text, kana(ref_folded), kana(got_folded)))
        if ref_morae == got_morae:
            self.all_pitch_right += 1
        elif [m for m, _ in ref_morae] == [m for m, _ in got_morae]:
            ref_sizes, got_sizes = phrase_sizes
            if sum(ref_sizes) == sum(got_sizes) == len(ref_morae):
                self.pitch_misses.update(_phrase_misses(ref_morae, got_morae, ref_sizes, got_sizes))
                self.mispitched.append((number, text, _render(ref_morae, ref_sizes), _render(got_morae, got_sizes)))
            else:
                self.pitch_misses["phrases not comparable"] += 1

    def _note_reading_misses(self, reference: list[str], got: list[str]) -> None:
        matcher = SequenceMatcher(None, reference, got, autojunk=False)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag != "equal":
                # One mora of context either side makes the miss recognisable.
                self.reading_misses[(kana(reference[max(a0 - 1, 0) : a1 + 1]), kana(got[max(b0 - 1, 0) : b1 + 1]))] += 1

    def report(self, misses: int) -> str:
        def pct(part: int, whole: int) -> str:
            return f"{100 * part / whole:.1f} %" if whole else "n/a"

        lines = [
            f"sentences                       {self.sentences}",
            f"read right (phonemes)           {pct(self.read_right, self.sentences)}",
            f"phoneme error rate              {pct(self.phoneme_errors, self.phonemes)}",
            f"mora error rate                 {pct(self.mora_errors, self.morae)}",
            f"morae with the right pitch      {pct(self.pitch_morae_right, self.pitch_morae)}",
            f"phones with the right pitch     {pct(self.pitch_phones_right, self.pitch_phones)}",
            f"sentences with every pitch right {pct(self.all_pitch_right, self.sentences)}",
            f"sentences that could not be read {self.unreadable}",
        ]
        if misses:
            lines.append("\nmost frequent reading misses (labelled → ours):")
            lines += [f"  {n:4d}  {a} → {b}" for (a, b), n in self.reading_misses.most_common(misses)]
            lines.append("\nlabelled accent phrases with a pitch miss, in sentences read right, by kind:")
            lines += [f"  {n:4d}  {kind}" for kind, n in self.pitch_misses.most_common()]
        return "\n".join(lines)


def _spans(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """(first, end) mora index of each phrase, from the phrases' mora counts."""
    spans: list[tuple[int, int]] = []
    start = 0
    for size in sizes:
        spans.append((start, start + size))
        start += size
    return spans


def _accent(morae: Sequence[Mora]) -> int:
    """The mora after which a phrase's pitch falls (1-based); 0 if it does not fall."""
    for index in range(len(morae) - 1):
        if morae[index][1] > morae[index + 1][1]:
            return index + 1
    return 0


def _phrase_misses(
    reference: Sequence[Mora], got: Sequence[Mora], ref_sizes: Sequence[int], got_sizes: Sequence[int]
) -> list[str]:
    """What went wrong in each labelled accent phrase whose pitch we miss (same morae on both sides)."""
    got_starts = {start for start, _ in _spans(got_sizes)} | {len(got)}
    kinds: list[str] = []
    for start, end in _spans(ref_sizes):
        if reference[start:end] == got[start:end]:
            continue
        if any(start < boundary < end for boundary in got_starts):
            kinds.append("we cut a phrase the labels run on")
        elif start not in got_starts or end not in got_starts:
            kinds.append("we run on across a phrase boundary of the labels")
        else:
            want, have = _accent(reference[start:end]), _accent(got[start:end])
            if not want:
                kinds.append("we fall where the labels are flat")
            elif not have:
                kinds.append("we are flat where the labels fall")
            else:
                kinds.append("we fall too early" if have < want else "we fall too late")
    return kinds


def _render(morae: Sequence[Mora], sizes: Sequence[int]) -> str:
    """Accent phrases as katakana, ↓ after the mora the pitch falls from, | between phrases."""
    phrases = []
    for start, end in _spans(sizes):
        spelled = [kana([mora]) for mora, _ in morae[start:end]]
        accent = _accent(morae[start:end])
        if accent:
            spelled[accent - 1] += "↓"
        phrases.append("".join(spelled))
    return " | ".join(phrases)


def parse_range(text: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d+)-(\d+)", text)
    if found is None or not 1 <= int(found.group(1)) <= int(found.group(2)) <= 5000:
        raise argparse.ArgumentTypeError(f"expected FIRST-LAST within 1-5000, got {text!r}")
    return int(found.group(1)), int(found.group(2))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a checkout of the jsut-label repository")
    parser.add_argument(
        "--sentences",
        type=parse_range,
        default=DEVELOPMENT,
        help="BASIC5000 numbers to read, FIRST-LAST (default 1-2500, the development half)",
    )
    parser.add_argument("--misses", type=int, default=25, help="how many of the most frequent misses to list")
    parser.add_argument("--list-misread", action="store_true", help="also list every sentence read wrongly")
    parser.add_argument(
        "--list-mispitched",
        action="store_true",
        help="also list every sentence read right with a pitch miss, phrase by phrase",
    )
    args = parser.parse_args(argv)
    first, last = args.sentences
    tally = Tally()
    frontend = Frontend(_CharacterTokenizer(), add_blank=False)
    reader = HomeAssistantReader()
    for number, text, stream in read_corpus(args.corpus, first, last):
        got, got_sizes, unreadable = ours(frontend, reader, text)
        reference, ref_sizes = labelled(stream)
        tally.unreadable += unreadable
        tally.add(number, text, reference, got, (ref_sizes, got_sizes))
    if not tally.sentences:
        print(f"no sentences {first}-{last} in {args.corpus}", file=sys.stderr)
        return 1
    print(f"JSUT basic5000, sentences {first:04d}-{last:04d}")
    print(tally.report(args.misses))
    if args.list_misread:
        print("\nread wrongly (labelled / ours):")
        for number, text, want, have in tally.missed:
            print(f"  {number:04d} {text}\n       {want}\n       {have}")
    if args.list_mispitched:
        print("\nread right, pitched wrongly (labelled / ours):")
        for number, text, want, have in tally.mispitched:
            print(f"  {number:04d} {text}\n       {want}\n       {have}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
