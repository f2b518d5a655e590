"""User dictionary: format, error messages, compilation and the CLI flags.

Applying a dictionary changes pyopenjtalk's global state, so every test that
applies one runs in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wyoming_hayakoe.text import TextError, openjtalk
from wyoming_hayakoe.text.user_dictionary import (
    DictionaryEntry,
    UserDictionaryError,
    check_entry,
    count_morae,
    load_user_dictionary,
    parse_user_dictionary,
    to_katakana,
)

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
# my words
Hue, ヒュー, 1
SwitchBot\tスイッチボット\t5\t7
瑞穂, みずほ, 0
Living Room, リビングルウム, 0

ホゲ部屋, ほげべや
"""


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )


def speak_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python(
        "import sys; sys.argv[0] = 'wyoming-hayakoe-speak'; from wyoming_hayakoe.cli.speak import run; run()", *args
    )


def test_parse_good_file():
    d = parse_user_dictionary(GOOD, "words.txt")
    assert [e.surface for e in d.entries] == ["Hue", "SwitchBot", "瑞穂", "Living Room", "ホゲ部屋"]
    hue, bot, mizuho, living, hoge = d.entries
    assert hue == DictionaryEntry("Hue", "ヒュー", 1, 5, 2)
    assert (bot.accent, bot.priority) == (5, 7)
    assert mizuho.reading == "ミズホ" and mizuho.accent == 0
    assert living.key == "LivingRoom"
    assert 0 <= hoge.accent <= hoge.morae  # guessed
    assert d.keep_words == ["Hue", "SwitchBot", "Living Room"]
    assert d.normalizer_keep_words == ["Hue", "SwitchBot", "LivingRoom"]


def test_priority_orders_costs():
    low = DictionaryEntry("A", "エー", 0, 1)
    mid = DictionaryEntry("A", "エー", 0, 5)
    high = DictionaryEntry("A", "エー", 0, 10)
    assert low.cost > mid.cost > high.cost


def test_morae_and_katakana():
    assert count_morae("キャット") == 3
    assert count_morae("ヒュー") == 2
    assert count_morae("リビングルーム") == 7
    assert to_katakana("みずほ") == "ミズホ"


def test_mecab_csv_row():
    row = parse_user_dictionary("Hue, ヒュー, 1").mecab_csv(1348)
    assert row == "Ｈｕｅ,1348,1348,2667,名詞,固有名詞,一般,*,*,*,Ｈｕｅ,ヒュー,ヒュー,1/2,*\n"


@pytest.mark.parametrize(
    "line,message",
    [
        ("Hue", "expected 'surface, reading"),
        ("Hue, hyu-", "must be katakana or hiragana"),
        ("Hue, ヒュー, 3", "accent 3 is past the end of 'ヒュー' (2 morae)"),
        ("Hue, ヒュー, one", "accent 'one' must be a whole number from 0 to 2"),
        ("Hue, ヒュー, 1, 11", "priority '11' must be a whole number from 1 to 10"),
        ("Hue, ヒュー, 1, 5, x", "too many fields"),
        ("R2D2, アールツーディーツー", "contains a digit"),
        ("Wi-Fi, ワイファイ", "a Latin surface may contain only letters"),
        ("ダイニングLight, ダイニングライト", "either Latin letters only or Japanese only"),
        ("、, テン", "either Latin letters only or Japanese only"),
        (", ヒュー", "the surface (first field) is empty"),
        ("Hue, ッヒュー", "cannot start with 'ッ'"),
    ],
)
def test_bad_entries_are_explained(line: str, message: str):
    with pytest.raises(UserDictionaryError) as err:
        parse_user_dictionary(f"# header\n{line}\n", "words.txt")
    text = str(err.value)
    assert "words.txt:2: " in text
    assert message in text


def test_every_problem_is_reported_at_once():
    with pytest.raises(UserDictionaryError) as err:
        parse_user_dictionary("Hue, ヒュー\nBad, bad\nHue, ヒュウ\n瑞穂, みずほ, 9\n", "d.csv")
    text = str(err.value)
    assert text.startswith("3 problem(s)")
    assert "d.csv:2:" in text and "d.csv:4:" in text
    assert "d.csv:3: 'Hue' is already defined on line 1" in text


def test_a_bad_dictionary_is_a_text_error():
    """Bad entries, and a line too long for OpenJTalk, raise the text layer's one kind of error."""
    with pytest.raises(TextError):
        parse_user_dictionary("Hue\n")
    with pytest.raises(TextError):
        openjtalk.check_dictionary_source("a" * 5000)


def test_file_errors(tmp_path: Path):
    with pytest.raises(UserDictionaryError, match="does not exist"):
        load_user_dictionary(tmp_path / "missing.csv")
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("Hue, ヒュー".encode() + b"\xff\n")
    with pytest.raises(UserDictionaryError, match="not UTF-8"):
        load_user_dictionary(bad)
    good = tmp_path / "ok.csv"
    good.write_text("\ufeffHue, ヒュー, 1\n", encoding="utf-8")
    assert len(load_user_dictionary(good)) == 1


def test_applied_dictionary_changes_readings(tmp_path: Path):
    words = tmp_path / "words.csv"
    words.write_text("Hue, ヒューイ, 1\n瑞穂, ミズホノ, 0\nLiving Room, リビンルーム, 0\n", encoding="utf-8")
    code = """
import sys
from wyoming_hayakoe.text.rewrite import HomeAssistantReader, katakana_reading
from wyoming_hayakoe.text.user_dictionary import load_user_dictionary
texts = ["Hueの電球を23.5%に", "瑞穂", "Living Roomの照明"]
before = [katakana_reading(t, punctuation=False) for t in texts]
d = load_user_dictionary(sys.argv[1])
d.apply()
reader = HomeAssistantReader(d.keep_words)
after = [katakana_reading(t, reader, punctuation=False) for t in texts]
print("|".join(before))
print("|".join(after))
"""
    result = run_python(code, str(words))
    assert result.returncode == 0, result.stderr
    before, after = result.stdout.strip().splitlines()
    assert before.split("|") == [
        "ヒューノデンキューヲニジューサンテンゴパーセントニ",
        "ミズホ",
        "リビングルームノショーメー",
    ]
    assert after.split("|") == [
        "ヒューイノデンキューヲニジューサンテンゴパーセントニ",
        "ミズホノ",
        "リビンルームノショーメー",
    ]


def test_a_dictionary_applied_later_wins_over_readings_already_made(tmp_path: Path):
    """Readings looked up before a dictionary is applied are not served from a cache after it."""
    words = tmp_path / "words.csv"
    words.write_text("Zorblax, ヤマダハナコ, 0\n", encoding="utf-8")
    code = """
import sys
from wyoming_hayakoe.text import normalize_text
from wyoming_hayakoe.text.rewrite import HomeAssistantReader, katakana_reading
from wyoming_hayakoe.text.user_dictionary import load_user_dictionary
reader = HomeAssistantReader()
def readings():
    return katakana_reading("Zorblaxをつけて", reader, punctuation=False) + "|" + normalize_text("Zorblax")
print(readings())
load_user_dictionary(sys.argv[1]).apply()
print(readings())
"""
    result = run_python(code, str(words))
    assert result.returncode == 0, result.stderr
    before, after = result.stdout.strip().splitlines()
    assert "ヤマダハナコ" not in before and before.endswith("|Zorblax")
    assert after == "ヤマダハナコヲツケテ|ヤマダハナコ"


def test_speak_reading_flag():
    result = speak_cli("--reading", "--text", "現在の気温は23.5°Cです。Living Roomの照明を消しました")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ゲンザイノキオンワニジューサンテンゴドデス。リビングルームノショーメーヲケシマシタ\n"


def test_speak_reading_with_dictionary(tmp_path: Path):
    words = tmp_path / "words.csv"
    words.write_text("Hue, ヒューイ, 1\n", encoding="utf-8")
    result = speak_cli("--reading", "--dictionary", str(words), "--text", "Hueをつけて")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ヒューイヲツケテ\n"  # nothing else on standard output


def test_speak_bad_dictionary_fails_clearly(tmp_path: Path):
    words = tmp_path / "words.csv"
    words.write_text("Hue, ヒュー, 7\n", encoding="utf-8")
    result = speak_cli("--reading", "--dictionary", str(words), "--text", "Hue")
    assert result.returncode == 2
    assert f"{words}:1: accent 7 is past the end" in result.stderr
    assert result.stdout == ""


def test_speak_needs_voice_and_output_without_reading():
    result = speak_cli("--text", "こんにちは")
    assert result.returncode == 2
    assert "--voice" in result.stderr and "--output" in result.stderr


def test_entries_written_back_read_the_same():
    """The lines the web page saves parse to the same entries; an estimated accent stays estimated."""
    source = "Hue, ヒュー, 1\nSwitchBot, すいっちぼっと\n瑞穂, みずほ, , 8\nLiving Room, リビングルーム, 4, 5\n"
    entries = parse_user_dictionary(source).entries
    written = "".join(entry.as_line() + "\n" for entry in entries)
    again = parse_user_dictionary(written).entries
    fields = [(e.surface, e.reading, e.accent, e.priority, e.estimated) for e in entries]
    assert [(e.surface, e.reading, e.accent, e.priority, e.estimated) for e in again] == fields
    assert [e.estimated for e in entries] == [False, True, True, False]
    assert "SwitchBot, スイッチボット\n" in written and "瑞穂, ミズホ, , 8\n" in written


def test_every_field_problem_of_an_entry_is_named():
    entry, problems = check_entry("R2D2", "hyu-", "x", "11")
    assert entry is None
    assert [p.field for p in problems] == ["surface", "reading", "accent", "priority"]
    assert all(p.message for p in problems)


def test_an_entrys_accent_is_what_the_page_shows_and_the_voice_says(tmp_path: Path):
    """The accent field survives the G2P's own accent rules: the page's phrases and the model's tones follow it."""
    code = """
import sys
from wyoming_hayakoe.text.hayakoe.g2p import analyze
from wyoming_hayakoe.text.hayakoe.phrases import accent_phrases
from wyoming_hayakoe.text.user_dictionary import parse_user_dictionary
for accent in range(4):
    parse_user_dictionary(f"瑞穂, ミズホ, {accent}").apply()
    phrase = accent_phrases("瑞穂を呼ぶ")[0]
    voice = analyze("瑞穂を呼ぶ", list)
    tones = [tone for phone, tone in zip(voice.phones, voice.tones) if phone in "aiueo"][:4]
    print(accent, "".join(m.kana for m in phrase.morae), phrase.accent, "".join("HL"[1 - m.high] for m in phrase.morae), "".join("HL"[1 - t] for t in tones))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.strip().splitlines()]
    # accent, phrase, accent shown, pitch shown, pitch the voice gets (ミズホヲ)
    assert lines == [
        ["0", "ミズホヲ", "0", "LHHH", "LHHH"],
        ["1", "ミズホヲ", "1", "HLLL", "HLLL"],
        ["2", "ミズホヲ", "2", "LHLL", "LHLL"],
        ["3", "ミズホヲ", "3", "LHHL", "LHHL"],
    ]
