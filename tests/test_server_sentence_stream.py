"""Incremental sentence segmentation of streamed (LLM) text."""

from __future__ import annotations

import random

import pytest

from wyoming_hayakoe.text.rewrite.stream import SentenceStream


def segment(deltas, max_length=200):
    stream = SentenceStream(max_length)
    fed = []
    for delta in deltas:
        fed += stream.feed(delta)
    return fed, stream.finish()


def every_split(text):
    """All sentences when `text` arrives one character at a time, and as one piece."""
    one_by_one = segment(list(text))
    whole = segment([text])
    return one_by_one, whole


def test_japanese_enders_split_as_soon_as_the_next_character_arrives():
    stream = SentenceStream(200)
    assert stream.feed("こんにちは。") == []  # a closer could still follow
    assert stream.feed("今") == ["こんにちは。"]
    assert stream.feed("日は良い天気ですね！明日") == ["今日は良い天気ですね！"]
    assert stream.finish() == ["明日"]


def test_closers_and_ender_runs_stay_with_their_sentence():
    fed, rest = segment(["「本当？」と彼は言った。", "えっ！？", "そう…", "。"])
    assert fed + rest == ["「本当？」", "と彼は言った。", "えっ！？", "そう…。"]


def test_ascii_enders_split_japanese_text():
    fed, rest = segment(["はい!次です?最後."])
    assert fed + rest == ["はい!", "次です?", "最後."]


def test_full_stops_inside_numbers_and_names_do_not_split():
    fed, rest = segment(["円周率は3.14です。example.comを見て。"])
    assert fed + rest == ["円周率は3.14です。", "example.comを見て。"]


def test_english_sentences_split_at_full_stop_and_space():
    fed, rest = segment(["Hello there. How are you? Fine."])
    assert fed + rest == ["Hello there.", "How are you?", "Fine."]


def test_line_breaks_end_sentences():
    fed, rest = segment(["一行目\n二行目\n\n- 三行目"])
    assert fed + rest == ["一行目", "二行目", "- 三行目"]


def test_token_deltas_give_the_same_sentences_as_one_piece():
    text = "今日は晴れです。明日は「雨」でしょう！傘を持って行きましょうか？はい、そうします。最後"
    rng = random.Random(7)
    deltas, i = [], 0
    while i < len(text):
        n = rng.randint(1, 5)
        deltas.append(text[i : i + n])
        i += n
    fed, rest = segment(deltas)
    whole_fed, whole_rest = segment([text])
    assert fed + rest == whole_fed + whole_rest
    assert fed + rest == [
        "今日は晴れです。",
        "明日は「雨」でしょう！",
        "傘を持って行きましょうか？",
        "はい、そうします。",
        "最後",
    ]


def test_wyoming_bench_style_chunks_with_trailing_spaces():
    # The trailing space shows that no closer follows: each sentence goes at once.
    fed, rest = segment(["こんにちは。 ", "今日は良い天気ですね。 "])
    assert fed == ["こんにちは。", "今日は良い天気ですね。"]
    assert rest == []


def test_runaway_sentence_is_cut_at_a_comma_within_the_cap():
    text = "ながいぶん、" * 30  # 180 characters, no sentence end
    fed, rest = segment(list(text), max_length=50)
    pieces = fed + rest
    assert all(len(p) <= 50 for p in pieces)
    assert all(p.endswith("、") for p in pieces)
    assert "".join(pieces) == text
    assert fed, "cut pieces must come out while text is still arriving"


def test_runaway_sentence_without_any_break_is_cut_hard():
    fed, rest = segment(["あ" * 120], max_length=50)
    assert [len(p) for p in fed + rest] == [50, 50, 20]


def test_long_complete_sentence_is_capped_too():
    fed, rest = segment(["あ" * 70 + "。次"], max_length=50)
    assert fed + rest == ["あ" * 50, "あ" * 20 + "。", "次"]


def test_symbols_only_pieces_join_the_next_sentence_or_vanish():
    fed, rest = segment(["🙂", "こんにちは。", "🎉🎉", "元気？", "🙂"])
    assert fed + rest == ["🙂こんにちは。", "🎉🎉元気？"]


def test_nothing_speakable_is_handed_over_so_the_caller_can_report_it():
    assert segment(["🙂🙂"]) == ([], ["🙂🙂"])
    assert segment(["   ", "\n"]) == ([], [])
    assert segment([]) == ([], [])


def test_max_length_must_be_sensible():
    with pytest.raises(ValueError):
        SentenceStream(3)


# -- with the reader's rules for where a cut would break a token ----------------------


def segment_safely(deltas, max_length=200):
    from wyoming_hayakoe.text.rewrite import safe_to_split

    stream = SentenceStream(max_length, can_split=safe_to_split)
    fed = []
    for delta in deltas:
        fed += stream.feed(delta)
    return fed + stream.finish()


def test_numbers_are_never_cut():
    text = "気温は23.5度です。湿度は1,500です!時刻は7:30。"
    assert segment_safely(list(text)) == ["気温は23.5度です。", "湿度は1,500です!", "時刻は7:30。"]


def test_numbered_lists_split_at_lines_not_after_the_number():
    text = "買い物リスト:\n1. りんご\n2. バナナ\n以上です。"
    assert segment_safely(list(text)) == ["買い物リスト:", "1. りんご", "2. バナナ", "以上です。"]


def test_code_blocks_and_urls_stay_whole():
    text = "例です。\n```\nprint(1)\nx = 2\n```\n詳しくは https://example.com/a?b=1. を見て。"
    sentences = segment_safely(list(text))
    assert sentences[0] == "例です。"
    assert "```\nprint(1)\nx = 2\n```" in sentences[1]
    assert any("https://example.com/a?b=1." in s for s in sentences)
