"""The reading benchmark (tools/reading_benchmark.py) on a tiny corpus in the layout of jsut-label.

The labels are written here by hand: one as we say the sentence, two with a
pitch of their own, so the measures and the kinds of miss can be checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.reading_benchmark import main

TEXT = "テニスをしました。"
LABELS = {
    1: "^-t-e-]-n-i-s-u-o-#-sh-i-[-m-a-]-sh-i-t-a-$",  # as we say it
    2: "^-t-e-]-n-i-s-u-o-sh-i-m-a-sh-i-t-a-$",  # one phrase: we cut it
    3: "^-t-e-[-n-i-]-s-u-o-#-sh-i-[-m-a-]-sh-i-t-a-$",  # テニ↓スオ: we fall too early
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "text_kana").mkdir()
    (tmp_path / "e2e_symbol").mkdir()
    (tmp_path / "text_kana" / "basic5000.yaml").write_text(
        "".join(f"BASIC5000_{n:04d}:\n  text_level0: {TEXT}\n  kana_level0: x\n" for n in LABELS), encoding="utf-8"
    )
    (tmp_path / "e2e_symbol" / "phoneme.yaml").write_text(
        "".join(f"BASIC5000_{n:04d}: {stream}\n" for n, stream in LABELS.items()), encoding="utf-8"
    )
    return tmp_path


def test_measures_and_kinds_of_pitch_miss(corpus: Path, capsys: pytest.CaptureFixture[str]):
    assert main([str(corpus), "--sentences", "1-3", "--list-mispitched"]) == 0
    out = capsys.readouterr().out
    assert "read right (phonemes)           100.0 %" in out
    assert "sentences with every pitch right 33.3 %" in out
    # 8 morae a sentence; we miss マ of sentence 2 (high after our cut), テ and ニ of sentence 3.
    assert "morae with the right pitch      87.5 %" in out
    assert "     1  we cut a phrase the labels run on" in out
    assert "     1  we fall too early" in out
    assert "       テ↓ニスオシマシタ\n       テ↓ニスオ | シマ↓シタ" in out


def test_the_default_is_the_development_half(corpus: Path, capsys: pytest.CaptureFixture[str]):
    assert main([str(corpus)]) == 0
    assert "sentences 0001-2500" in capsys.readouterr().out
