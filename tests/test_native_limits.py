"""Text OpenJTalk's C code would crash on is cut into pieces or refused, never passed on.

pyopenjtalk segfaults on long runs (about 8 KiB of its widened input, 344
kana in a row) and on long user-dictionary lines; see
wyoming_hayakoe/text/openjtalk.py for the measured thresholds. Each hostile
input here runs in a child process, so a crash fails the test (naming the
input) instead of killing pytest.
"""

from __future__ import annotations

import json

import pytest
from isolated import CURRENT, assert_survives, run_child

from wyoming_hayakoe.text.user_dictionary import UserDictionaryError, parse_user_dictionary

# The documented limits of a user dictionary entry (docs/reading.md, addon/DOCS.md).
MAX_SURFACE_CHARS = MAX_READING_CHARS = 100

#: name → text; each is far past a crash threshold of unguarded pyopenjtalk.
HOSTILE = {
    "ha*1500": "ha" * 1500,
    "e*3000": "e" * 3000,
    "E*3000": "E" * 3000,
    "katakana*400": "ア" * 400,
    "hiragana+katakana*400": "あア" * 200,
    "half-width katakana*400": "ｱ" * 400,
    "katakana between control characters": "ア\x01" * 400,
    "値*3000 (misread-word fix on a long line)": "値" * 3000,
    "kanji*3000": "漢" * 3000,
    "emoji*2100": "😀" * 2100,
    "greek*4200": "α" * 4200,
    "digits*5000": "1" * 5000,
    "digits*5000 with counters and units": "1" * 5000
    + "件、"
    + "2" * 5000
    + "h 3m、"
    + "4" * 5000
    + "min、"
    + "5" * 5000
    + "th",
    "NFKC expansion ㌖*1000": "㌖" * 1000,
    "lone surrogate": "値段\ud800は",
    "NUL": "値段\x00は",
}

CHILD = r"""
import json, sys
from pathlib import Path
from wyoming_hayakoe.engine.bert import CharacterTokenizer
from wyoming_hayakoe.engine.engine import bounded_sentences
from wyoming_hayakoe.text import Frontend, UnpronounceableText, split_sentences
from wyoming_hayakoe.text.rewrite import HomeAssistantReader, katakana_reading

cases = json.loads(sys.stdin.read())
frontend = Frontend(CharacterTokenizer.from_folder(Path(sys.argv[1])))
reader = HomeAssistantReader()
out = {}
for name, text in cases.items():
    print("CURRENT " + name, flush=True)
    reading = katakana_reading(text, reader, punctuation=False)
    rewritten = reader.rewrite(text)
    phonemized = refused = 0
    for sentence in [text, *bounded_sentences(split_sentences(rewritten))]:
        try:
            frontend.phonemize(sentence)
            phonemized += 1
        except UnpronounceableText:
            refused += 1
    out[name] = {"reading": reading, "phonemized": phonemized, "refused": refused}
print("RESULT " + json.dumps(out, ensure_ascii=True))
"""


def run_cases(cases: dict[str, str], tokenizer_dir) -> dict:
    # JSON on stdin: lone surrogates survive as \ud800 escapes.
    result = run_child(CHILD, str(tokenizer_dir), stdin=json.dumps(cases, ensure_ascii=True))
    assert_survives(result)
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def results(bert_tokenizer_dir) -> dict:
    return run_cases(HOSTILE, bert_tokenizer_dir)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_is_read_and_phonemized_without_crashing(results, name):
    outcome = results[name]
    # The whole text (as a direct caller would pass it) and every sentence
    # the engine would speak were phonemized or refused with a clear error.
    assert outcome["phonemized"] + outcome["refused"] >= 2


@pytest.mark.parametrize(
    ("name", "reading"),
    [
        ("e*3000", "イー" * 3000),
        ("ha*1500", "エイチエー" * 1500),
        ("katakana*400", "ア" * 400),
        ("half-width katakana*400", "ア" * 400),
        ("katakana between control characters", "ア" * 400),
        ("digits*5000", "イチ" * 5000),
        ("lone surrogate", "ネダンワ"),
        ("NUL", "ネダンワ"),
    ],
)
def test_long_runs_are_spoken_in_full(results, name, reading):
    assert results[name]["reading"] == reading


def test_speak_reading_of_a_runaway_word():
    result = run_child(
        "import sys; sys.argv[0] = 'wyoming-hayakoe-speak'; from wyoming_hayakoe.cli.speak import run; run()",
        "--reading",
        "--text",
        "e" * 3000,
    )
    assert_survives(result)
    assert result.stdout == "イー" * 3000 + "\n"


# -- user dictionary ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("瑞" * (MAX_SURFACE_CHARS + 1) + ", ミズホ", f"at most {MAX_SURFACE_CHARS}"),
        ("Q" * (MAX_SURFACE_CHARS + 1) + ", キュー", f"at most {MAX_SURFACE_CHARS}"),
        ("瑞穂, " + "ア" * (MAX_READING_CHARS + 1), f"at most {MAX_READING_CHARS}"),
    ],
)
def test_dictionary_entries_that_are_too_long_are_refused(line, message):
    with pytest.raises(UserDictionaryError) as err:
        parse_user_dictionary(line + "\n", "words.txt")
    assert "words.txt:1: " in str(err.value) and message in str(err.value)


def test_longest_dictionary_entries_work():
    surface, reading = "瑞" * MAX_SURFACE_CHARS, "ア" * MAX_READING_CHARS
    code = f"""
from wyoming_hayakoe.text.rewrite import katakana_reading
from wyoming_hayakoe.text.user_dictionary import parse_user_dictionary
parse_user_dictionary("{surface}, {reading}, 0").apply()
print(katakana_reading("{surface}", punctuation=False))
"""
    result = run_child(code)
    assert_survives(result)
    assert result.stdout.strip() == reading


def test_a_dictionary_line_too_long_for_mecab_is_an_error_not_a_crash():
    # Past the parser's checks (entries built directly): the compiler itself refuses.
    code = f"""
from wyoming_hayakoe.text.user_dictionary import DictionaryEntry, UserDictionary, UserDictionaryError
for surface, reading in (("瑞" * 1400, "ミズホ"), ("瑞穂", "ア" * 1400)):
    print("{CURRENT}" + str(len(surface)) + "/" + str(len(reading)), flush=True)
    try:
        UserDictionary([DictionaryEntry(surface, reading, 0)]).apply()
    except UserDictionaryError as err:
        print("refused:", err)
"""
    result = run_child(code)
    assert_survives(result)
    assert result.stdout.count("refused: cannot compile user dictionary") == 2, result.stdout


def test_speak_with_a_hostile_dictionary_fails_clearly(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("瑞" * 1400 + ", ミズホ\n", encoding="utf-8")
    result = run_child(
        "import sys; sys.argv[0] = 'wyoming-hayakoe-speak'; from wyoming_hayakoe.cli.speak import run; run()",
        "--reading",
        "--dictionary",
        str(words),
        "--text",
        "瑞穂",
    )
    assert result.returncode == 2, result.stderr
    assert f"{words}:1: the surface is 1400 characters long; at most {MAX_SURFACE_CHARS}" in result.stderr
