"""The text-path fuzz itself, run by tests/test_fuzz_text.py in a child process of its own.

Every example goes the whole way the server takes text: the Home Assistant
rewrite, the stream sentence split with the stream rewriter, the whole-text
split with the sentence bound, and the frontend (normaliser, OpenJTalk,
tokenizer); plus the katakana reading of `--reading`. The frontend may
refuse a sentence with UnpronounceableText; anything else raised fails the
example, and a crash kills this process (the parent then reports the input
written to --last just before).

    PYTHONPATH=. python tests/fuzz_text_child.py --tokenizer DIR --examples N --last FILE [--seed S]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from wyoming_hayakoe.engine.bert import CharacterTokenizer
from wyoming_hayakoe.engine.engine import MAX_PAUSE_TEXT_CHARS, MAX_SENTENCE_CHARS, bounded_sentences
from wyoming_hayakoe.text import Frontend, UnpronounceableText, split_sentences
from wyoming_hayakoe.text.rewrite import HomeAssistantReader, katakana_reading, safe_to_split
from wyoming_hayakoe.text.rewrite.stream import SentenceStream


def chars(*ranges: tuple[int, int]) -> st.SearchStrategy[str]:
    return st.one_of(*(st.integers(lo, hi) for lo, hi in ranges)).map(chr)


LATIN = chars((0x41, 0x5A), (0x61, 0x7A))
DIGITS = chars((0x30, 0x39))
HIRAGANA = chars((0x3041, 0x309F))
KATAKANA = chars((0x30A0, 0x30FF), (0x31F0, 0x31FF))
HALF_WIDTH_KATAKANA = chars((0xFF66, 0xFF9F))
KANJI = chars((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF))
FULL_WIDTH = chars((0xFF01, 0xFF5E))
SYMBOLS = st.sampled_from(
    list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~、。，．・「」『』（）【】…‥〜～ー―々〆〇※★♪→°℃¥€£µ²³×÷±√")
)
EMOJI_SINGLE = chars((0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x2600, 0x27BF))
SKIN_TONES = chars((0x1F3FB, 0x1F3FF))
REGIONAL = chars((0x1F1E6, 0x1F1FF))
COMBINING = chars((0x0300, 0x036F), (0x3099, 0x309A), (0x20D0, 0x20FF), (0xFE00, 0xFE0F))
CONTROL = chars((0x00, 0x1F), (0x7F, 0x9F))
INVISIBLE = st.sampled_from(
    ["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029", "\ufeff", "\u00a0", "\u3000", "\u2060"]
)
SURROGATES = chars((0xD800, 0xDFFF))
PRIVATE_USE = chars((0xE000, 0xF8FF), (0xF0000, 0xF0010))
OTHER_SCRIPTS = chars((0x0370, 0x03FF), (0x0400, 0x04FF), (0xAC00, 0xD7A3), (0x0600, 0x06FF), (0x0E00, 0x0E7F))
EXPANDING = chars((0x3300, 0x33FF), (0x2160, 0x217F), (0xFDFA, 0xFDFB), (0x3250, 0x32FF), (0x2460, 0x24FF))

ANY_CHAR = st.one_of(
    LATIN,
    DIGITS,
    HIRAGANA,
    KATAKANA,
    HALF_WIDTH_KATAKANA,
    KANJI,
    FULL_WIDTH,
    SYMBOLS,
    EMOJI_SINGLE,
    COMBINING,
    CONTROL,
    INVISIBLE,
    SURROGATES,
    PRIVATE_USE,
    OTHER_SCRIPTS,
    EXPANDING,
)

EMOJI_SEQUENCE = st.one_of(
    st.tuples(EMOJI_SINGLE, SKIN_TONES).map("".join),
    st.lists(EMOJI_SINGLE, min_size=2, max_size=5).map("\u200d".join),  # ZWJ sequences
    st.tuples(REGIONAL, REGIONAL).map("".join),  # flags
    st.tuples(DIGITS, st.just("\ufe0f\u20e3")).map("".join),  # keycaps
    st.tuples(EMOJI_SINGLE, st.just("\ufe0f")).map("".join),
)

# What Home Assistant and LLMs send, so the rewrite's rules are exercised.
HA_FRAGMENTS = st.sampled_from(
    [
        "23.5°C",
        "-3℃",
        "1,500円",
        "$12.99",
        "7:30",
        "12:05:09 PM",
        "2024-12-24T07:30:00",
        "12/24(火)",
        "1h 30m",
        "20〜25",
        "20-25%",
        "45km/h",
        "3.5kWh",
        "1013hPa",
        "12µg/m³",
        "Home Assistant",
        "Wi-Fi 6",
        "Apple TV",
        "SwitchBot",
        "MQTT",
        "light.living_room",
        "**重要**",
        "# 見出し",
        "- 項目",
        "1. 最初",
        "| a | b |",
        "```\ncode\n```",
        "`x`",
        "[リンク](http://x.y)",
        "https://example.com/a?b=c",
        "user@example.com",
        "晴れのち曇り",
        "窓センサー: 開",
        "値",
        "風量",
        "9分",
        "10分",
        "3件",
        "Ⅻ",
        "No.5",
        "090-1234-5678",
        "1.2.3",
        "3.14",
        ".5",
        "1️⃣",
        "→",
        "...",
        "!!!???",
        "ーーー",
        "~~消~~",
        "<b>太字</b>",
        "hahaha",
        "Supercalifragilisticexpialidocious",
        "don't",
        "IPv6",
        "PM2.5",
        "Shelly 1PM",
        "5G",
        "4K",
    ]
)

# Lengths at and around where unguarded OpenJTalk crashed (per character:
# 3, 2 or 4 widened bytes; 344 kana in a row; the 1,366-letter --reading).
CRASH_LENGTHS = st.sampled_from(
    [200, 201, 343, 344, 345, 1365, 1366, 1367, 2050, 2051, 2733, 2734, 2735, 3000, 4101, 4102]
)
LONG_LENGTH = st.one_of(CRASH_LENGTHS, st.integers(300, 3000))

SHORT = st.one_of(
    st.text(ANY_CHAR, max_size=30),
    st.text(st.one_of(HIRAGANA, KATAKANA, KANJI, SYMBOLS), min_size=1, max_size=40),
    st.text(st.one_of(LATIN, DIGITS, SYMBOLS), min_size=1, max_size=20),
    EMOJI_SEQUENCE,
    HA_FRAGMENTS,
)
LONG = st.one_of(
    st.builds(lambda ch, n: ch * n, ANY_CHAR, LONG_LENGTH),  # one character repeated
    st.builds(
        lambda unit, n: (unit * n)[:n], st.one_of(SHORT, EMOJI_SEQUENCE).filter(bool), LONG_LENGTH
    ),  # a unit repeated
    st.builds(lambda ch, n: ch * n, st.one_of(LATIN, KATAKANA, HALF_WIDTH_KATAKANA, HIRAGANA), CRASH_LENGTHS),
    st.text(
        st.one_of(LATIN, KATAKANA, HIRAGANA, HALF_WIDTH_KATAKANA, CONTROL), min_size=300, max_size=3000
    ),  # no spaces
)
SEPARATORS = st.sampled_from(["", "", " ", "\n", "。", "、", "！", "? ", "\n\n", "・", "\t"])


def texts(tokens: st.SearchStrategy[str], max_tokens: int) -> st.SearchStrategy[str]:
    return st.lists(st.tuples(tokens, SEPARATORS), min_size=1, max_size=max_tokens).map(
        lambda parts: "".join(token + sep for token, sep in parts)
    )


# A very long token with short ones around it.
LONG_TEXT = st.tuples(
    st.one_of(st.just(""), texts(SHORT, 2)), LONG, SEPARATORS, st.one_of(st.just(""), texts(SHORT, 2))
).map("".join)
# Mostly short mixed texts (they are cheap); one in eight is a long one.
TEXT = st.sampled_from(range(8)).flatmap(lambda k: LONG_TEXT if k == 0 else texts(SHORT, 10))


class TextPath:
    """One example through every step; counts what the frontend did."""

    def __init__(self, tokenizer_dir: str, last: Path) -> None:
        self.frontend = Frontend(CharacterTokenizer.from_folder(Path(tokenizer_dir)))
        self.reader = HomeAssistantReader(keep_words=["Living Room", "HayaKoe"])
        self.last = last
        self.examples = self.phonemized = self.refused = 0
        self.seen: set[str] = set()  # sentences of this example already phonemized (the paths overlap)

    def phonemize(self, sentence: str) -> None:
        if sentence in self.seen:
            return
        self.seen.add(sentence)
        try:
            phonemes = self.frontend.phonemize(sentence)
        except UnpronounceableText:
            self.refused += 1
            return
        assert len(phonemes.word2ph) == len(phonemes.bert_text) + 2
        assert sum(phonemes.word2ph) == len(phonemes.phone_ids)
        self.phonemized += 1

    def speak_bounded(self, text: str) -> None:
        for part in bounded_sentences([text]):
            self.phonemize(part)

    def __call__(self, text: str, delta: int) -> None:
        self.examples += 1
        self.seen.clear()
        self.last.write_text(ascii(text), encoding="ascii")  # ascii(): lone surrogates stay readable
        # Streaming: deltas → sentences → stream rewriter → bounded parts.
        stream, rewrite = SentenceStream(MAX_SENTENCE_CHARS, can_split=safe_to_split), self.reader.stream()
        sentences: list[str] = []
        for start in range(0, len(text), delta):
            sentences += stream.feed(text[start : start + delta])
        sentences += stream.finish()
        previous = None
        for index, sentence in enumerate(sentences):
            rewritten = rewrite(sentence)
            self.speak_bounded(rewritten)
            if previous is not None and index <= 3:  # the pause window across a boundary (a few suffice)
                self.phonemize(previous + rewritten)
            previous = rewritten

        # A whole text: rewrite, split, bound; the whole-text pause pass.
        rewritten = self.reader.rewrite(text)
        split = split_sentences(rewritten)
        for sentence in bounded_sentences(split if len(split) > 1 else [rewritten]):
            self.phonemize(sentence)
        if len(rewritten) <= MAX_PAUSE_TEXT_CHARS:
            self.phonemize(rewritten)

        # The raw text straight into the frontend, and the --reading display.
        self.phonemize(text)
        katakana_reading(text, self.reader)


def main() -> int:
    logging.disable(logging.WARNING)  # "Cannot read …" for every odd character: not what is checked here
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--examples", type=int, required=True)
    parser.add_argument("--last", type=Path, required=True)
    parser.add_argument(
        "--seed", type=int, default=None, help="random seed (default: derandomized, the same examples every run)"
    )
    args = parser.parse_args()

    path = TextPath(args.tokenizer, args.last)
    test = settings(
        max_examples=args.examples,
        deadline=None,
        derandomize=args.seed is None,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )(given(text=TEXT, delta=st.integers(1, 64))(lambda text, delta: path(text, delta)))
    if args.seed is not None:
        test = seed(args.seed)(test)
    test()
    print(f"FUZZ examples={path.examples} phonemized={path.phonemized} refused={path.refused}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
