"""cut_position: where a runaway sentence is cut."""

from __future__ import annotations

import pytest

from wyoming_hayakoe.text.hayakoe.sentences import cut_position


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError):
        cut_position("あいうえお、かきくけこ", limit)


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 7, 10, 20, 33])
@pytest.mark.parametrize(
    "text",
    [
        "あ" * 50,
        "、" * 50,
        "あいう、えお、" * 10,
        "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 2,
        " " * 50,
    ],
)
def test_cut_is_within_one_to_limit(text: str, limit: int) -> None:
    assert len(text) > limit
    assert 1 <= cut_position(text, limit) <= limit
    assert 1 <= cut_position(text, limit, lambda _text, _index: False) <= limit


def test_cuts_after_last_soft_break_in_window() -> None:
    text = "あいうえお、かきくけこ、さしすせそたちつてと"  # breaks at 5 and 11
    assert cut_position(text, 15) == 12
    assert cut_position(text, 11) == 6  # the break at 11 is just outside the window
    assert cut_position(text, 12) == 12  # ...and just inside


def test_other_soft_breaks() -> None:
    assert cut_position("hello world,thisisverylong", 20) == 12
    assert cut_position("abcdefgh ijklmnopqrstu", 20) == 9
    assert cut_position("あいうえお・かきくけこさしすせそ", 12) == 6


def test_ignores_breaks_in_first_quarter() -> None:
    text = "あ、" + "い" * 40  # only break at index 1, within the first quarter of 20
    assert cut_position(text, 20) == 20
    text = "あいうえお、" + "い" * 40  # break at index 5: 20 // 4 == 5, so usable
    assert cut_position(text, 20) == 6


def test_respects_can_split() -> None:
    text = "あいうえお、かきくけこ、さしすせそたちつてと"
    forbidden = {12}
    assert cut_position(text, 15, lambda _t, index: index not in forbidden) == 6
    assert cut_position(text, 15, lambda _t, _index: False) == 15
    seen: list[tuple[str, int]] = []
    cut_position(text, 15, lambda t, index: seen.append((t, index)) or True)
    assert seen == [(text, 12)]


def test_hard_cut_at_limit_without_breaks() -> None:
    assert cut_position("あ" * 100, 30) == 30
    assert cut_position("abcdefghijklmnopqrstuvwxyz", 1) == 1
