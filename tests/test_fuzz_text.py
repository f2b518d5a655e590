"""Property-based fuzz of the whole text path, in a child process so that a crash is a failure, not a dead pytest.

tests/fuzz_text_child.py generates texts of every script, very long tokens
and repeated characters (at the lengths where unguarded OpenJTalk crashed),
control characters, combining marks, emoji sequences, lone surrogates and
full-width forms, and sends each through the rewrite, the stream sentence
split, the sentence bound and the frontend.

The examples are the same on every run (derandomized). HAYAKOE_FUZZ_EXAMPLES
sets how many (default 3000, about a minute); HAYAKOE_FUZZ_SEED draws other
examples from that seed instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fuzz_text_child import ANY_CHAR, LONG_TEXT, TEXT
from hypothesis import given, settings
from hypothesis import strategies as st
from isolated import how_it_ended, run_child

from wyoming_hayakoe.text import openjtalk

CHILD = Path(__file__).with_name("fuzz_text_child.py")
EXAMPLES = int(os.environ.get("HAYAKOE_FUZZ_EXAMPLES", "3000"))


def test_no_text_crashes_the_text_path(bert_tokenizer_dir, tmp_path):
    last = tmp_path / "last-example.txt"
    args = ["--tokenizer", str(bert_tokenizer_dir), "--examples", str(EXAMPLES), "--last", str(last)]
    if os.environ.get("HAYAKOE_FUZZ_SEED"):
        args += ["--seed", os.environ["HAYAKOE_FUZZ_SEED"]]
    result = run_child(CHILD.read_text(encoding="utf-8"), *args, timeout=max(600, EXAMPLES))
    if result.returncode != 0:
        example = last.read_text(encoding="ascii")[:2000] if last.exists() else "(none)"
        raise AssertionError(
            f"{how_it_ended(result)}\n--- last example (ascii) ---\n{example}\n--- stdout (end) ---\n{result.stdout[-3000:]}"
        )
    counts = re.search(r"FUZZ examples=(\d+) phonemized=(\d+) refused=(\d+)", result.stdout)
    assert counts, result.stdout[-2000:]
    examples, phonemized, _ = map(int, counts.groups())
    assert examples >= EXAMPLES and phonemized > examples, result.stdout[-2000:]


# -- the cutter itself (pure Python, in process) ---------------------------------------


def fits(text: str) -> bool:
    longest = run = 0
    for ch in text:
        run = run + 1 if openjtalk.is_kana(ch) else 0
        longest = max(longest, run)
    return sum(map(openjtalk.widened_bytes, text)) <= openjtalk.MAX_PIECE_BYTES and longest <= openjtalk.MAX_KANA_RUN


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(text=st.one_of(TEXT, LONG_TEXT, st.builds(lambda ch, n: ch * n, ANY_CHAR, st.integers(1, 9000))))
def test_pieces_keep_every_character_and_stay_within_the_limits(text):
    clean = openjtalk.clean(text)
    pieces = openjtalk.pieces(text)
    assert "".join(pieces) == clean and all(pieces)
    assert all(fits(piece) for piece in pieces)
    if fits(clean):
        assert pieces == ([clean] if clean else [])
