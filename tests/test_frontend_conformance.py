"""Our text frontend must reproduce hayakoe 1.3.1's text processing exactly.

hayakoe is the oracle here (and only here): every input of
``tests/data/conformance_corpus.txt`` goes through both implementations and
the normalised text, phones, tones, word2ph, BERT input text, the final
model inputs (``prepare_phone_sequences``, with and without add_blank) and
the sentence split must be identical.  Where hayakoe raises, we must raise
:class:`UnpronounceableText`.

The one allowed difference: Latin words that pyopenjtalk does not know but
hayakoe's bundled English→katakana dictionary does (we do not ship it).
Such inputs are counted and reported, and skipped for the text-dependent
comparisons.
"""

from __future__ import annotations

import os
import re
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# hayakoe / transformers must never try to reach the hub.
os.environ["HF_HUB_OFFLINE"] = "1"

pytest.importorskip(
    "hayakoe",
    reason="hayakoe (the reference implementation) is not installed; it is only needed as a test oracle",
)

from hayakoe_g2p import use_our_g2p  # noqa: E402

from wyoming_hayakoe.engine.bert import CharacterTokenizer  # noqa: E402
from wyoming_hayakoe.text import Frontend, UnpronounceableText, split_sentences  # noqa: E402
from wyoming_hayakoe.text.hayakoe.g2p import analyze  # noqa: E402
from wyoming_hayakoe.text.hayakoe.normalize import normalize_text  # noqa: E402

CORPUS = Path(__file__).parent / "data" / "conformance_corpus.txt"
_ESCAPE = re.compile(r"\\(\\|n|t|r|#|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")
_SIMPLE_ESCAPES = {"\\": "\\", "n": "\n", "t": "\t", "r": "\r", "#": "#"}
MAX_SHOWN = 8


def _unescape(line: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        return _SIMPLE_ESCAPES.get(code) or chr(int(code[1:], 16))

    return _ESCAPE.sub(one, line)


def load_corpus() -> list[str]:
    inputs = []
    for line in CORPUS.read_text(encoding="utf-8").split("\n")[:-1]:
        if line.startswith("#"):
            continue
        inputs.append(_unescape(line))
    return inputs


@dataclass
class Outcome:
    """What one implementation produced (or where it failed)."""

    error: BaseException | None = None
    value: Any = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _attempt(fn, *args, **kwargs) -> Outcome:
    try:
        return Outcome(value=fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - we record every failure
        return Outcome(error=exc)


class NotRun(Exception):
    """Placeholder: this step was not reached because an earlier one failed."""


def _not_run() -> Outcome:
    return Outcome(error=NotRun())


@dataclass
class Case:
    text: str
    english_dict: list[str] = field(default_factory=list)
    ref_norm: Outcome = field(default_factory=_not_run)
    ref_g2p: Outcome = field(default_factory=_not_run)
    ref_bert: Outcome = field(default_factory=_not_run)
    ref_prep: Outcome = field(default_factory=_not_run)
    ref_split: Outcome = field(default_factory=_not_run)
    our_norm: Outcome = field(default_factory=_not_run)
    our_g2p: Outcome = field(default_factory=_not_run)
    our_phon: Outcome = field(default_factory=_not_run)
    our_split: Outcome = field(default_factory=_not_run)

    def reference_failure(self) -> str | None:
        """Why hayakoe could not produce model inputs for this text, if it could not."""
        for step in (self.ref_norm, self.ref_g2p, self.ref_prep, self.ref_bert):
            if not step.ok and not isinstance(step.error, NotRun):
                return f"{type(step.error).__name__}: {step.error}"
        if len(self.ref_prep.value[4]) != len(self.ref_bert.value) + 2:
            return "AssertionError: BERT stage, len(word2ph) != len(bert_text) + 2"
        return None


class Oracle:
    """Thin access layer to hayakoe's text processing."""

    def __init__(self, tokenizer_dir: Path) -> None:
        from hayakoe.api.speaker import _split_sentences
        from hayakoe.models.hyper_parameters import HyperParameters
        from hayakoe.models.text_preprocess import prepare_phone_sequences
        from hayakoe.nlp import bert_models
        from hayakoe.nlp.japanese import normalizer
        from hayakoe.nlp.japanese.g2p import g2p, text_to_sep_kata
        from hayakoe.nlp.japanese.user_dict import registered_surfaces

        use_our_g2p()
        bert_models.unload_tokenizer()
        bert_models.load_tokenizer(str(tokenizer_dir))
        self.normalize = normalizer.normalize_text
        self.g2p = g2p
        self.text_to_sep_kata = text_to_sep_kata
        self.prepare = prepare_phone_sequences
        self.split = _split_sentences
        self._native_reading = normalizer._native_reading
        self._en_dict = normalizer._get_en_to_kata_dict()
        self._user_surfaces = {unicodedata.normalize("NFKC", s) for s in registered_surfaces()}
        self.hps = HyperParameters()
        self.hps_plain = HyperParameters.model_validate({"version": "2.0", "data": {"add_blank": False}})

    def english_dict_words(self, text: str) -> list[str]:
        """Words for which hayakoe falls back to its bundled dictionary."""
        words = re.findall(r"[A-Za-z]+", unicodedata.normalize("NFKC", text))
        return [
            w
            for w in words
            if w not in self._user_surfaces and self._native_reading(w) is None and w.lower() in self._en_dict
        ]

    def bert_text(self, norm_text: str) -> str:
        return "".join(self.text_to_sep_kata(norm_text, raise_yomi_error=False)[0])


@pytest.fixture(scope="module")
def oracle(bert_tokenizer_dir: Path) -> Oracle:
    return Oracle(bert_tokenizer_dir)


@pytest.fixture(scope="module")
def our_tokenizer(bert_tokenizer_dir: Path) -> CharacterTokenizer:
    return CharacterTokenizer.from_folder(bert_tokenizer_dir)


@pytest.fixture(scope="module")
def run(oracle: Oracle, our_tokenizer) -> dict[str, Any]:
    """Run both implementations over the whole corpus once."""
    frontend = Frontend(our_tokenizer)
    tokenize = our_tokenizer.tokenize
    cases: list[Case] = []
    started = time.perf_counter()
    for text in load_corpus():
        case = Case(text=text, english_dict=oracle.english_dict_words(text))
        case.ref_norm = _attempt(oracle.normalize, text)
        if case.ref_norm.ok:
            case.ref_g2p = _attempt(oracle.g2p, case.ref_norm.value, True, False)
            case.ref_bert = _attempt(oracle.bert_text, case.ref_norm.value)
        case.ref_prep = _attempt(oracle.prepare, text, oracle.hps)
        case.ref_split = _attempt(oracle.split, text)

        case.our_norm = _attempt(normalize_text, text)
        if case.our_norm.ok:
            case.our_g2p = _attempt(analyze, case.our_norm.value, tokenize)
        case.our_phon = _attempt(frontend.phonemize, text)
        case.our_split = _attempt(split_sentences, text)
        cases.append(case)
    return {"cases": cases, "seconds": time.perf_counter() - started}


def _comparable(run: dict[str, Any]) -> list[Case]:
    return [c for c in run["cases"] if not c.english_dict]


def _report(problems: list[str], what: str) -> None:
    if problems:
        shown = "\n".join(problems[:MAX_SHOWN])
        more = f"\n... and {len(problems) - MAX_SHOWN} more" if len(problems) > MAX_SHOWN else ""
        pytest.fail(f"{len(problems)} input(s) differ from hayakoe in {what}:\n{shown}{more}")


def test_corpus_is_large_and_varied() -> None:
    inputs = load_corpus()
    assert len(inputs) >= 1000
    assert len(set(inputs)) == len(inputs), "duplicate corpus entries"
    assert "" in inputs
    assert any("\n" in t for t in inputs)
    assert any(len(t) >= 100 for t in inputs)


def test_only_unpronounceable_text_is_raised(run: dict[str, Any]) -> None:
    problems = []
    for case in run["cases"]:
        for name in ("our_norm", "our_g2p", "our_phon", "our_split"):
            err = getattr(case, name).error
            if err is not None and not isinstance(err, (UnpronounceableText, NotRun)):
                problems.append(f"{case.text!r}: {name} raised {err!r}")
    _report(problems, "exception types (ours raised something other than UnpronounceableText)")


def test_split_sentences_identical(run: dict[str, Any]) -> None:
    problems = [
        f"{c.text!r}: hayakoe {c.ref_split.value!r} != ours {c.our_split.value!r}"
        for c in run["cases"]
        if c.ref_split.value != c.our_split.value
    ]
    _report(problems, "split_sentences")


def test_normalize_identical(run: dict[str, Any]) -> None:
    problems = []
    for c in _comparable(run):
        if not c.ref_norm.ok:
            if not isinstance(c.our_norm.error, UnpronounceableText):
                problems.append(f"{c.text!r}: hayakoe raised {c.ref_norm.error!r}, ours gave {c.our_norm!r}")
        elif c.ref_norm.value != c.our_norm.value:
            problems.append(
                f"{c.text!r}: hayakoe {c.ref_norm.value!r} != ours {c.our_norm.value!r} ({c.our_norm.error!r})"
            )
    _report(problems, "normalize_text")


def test_g2p_identical(run: dict[str, Any]) -> None:
    problems = []
    for c in _comparable(run):
        if not c.ref_norm.ok or not c.our_norm.ok:
            continue  # covered by test_normalize_identical
        if not c.ref_g2p.ok:
            if not isinstance(c.our_g2p.error, UnpronounceableText):
                problems.append(f"{c.text!r}: hayakoe raised {c.ref_g2p.error!r}, ours gave {c.our_g2p!r}")
            continue
        if not c.our_g2p.ok:
            problems.append(f"{c.text!r}: ours raised {c.our_g2p.error!r}")
            continue
        ours = c.our_g2p.value
        ref_phones, ref_tones, ref_word2ph = c.ref_g2p.value
        if (ref_phones, ref_tones, ref_word2ph) != (ours.phones, ours.tones, ours.word2ph):
            problems.append(
                f"{c.text!r}:\n  hayakoe {list(zip(ref_phones, ref_tones))} w2p {ref_word2ph}"
                f"\n  ours    {list(zip(ours.phones, ours.tones))} w2p {ours.word2ph}"
            )
    _report(problems, "g2p (phones, tones, word2ph)")


def test_bert_text_identical(run: dict[str, Any]) -> None:
    problems = []
    for c in _comparable(run):
        if not (c.ref_bert.ok and c.ref_g2p.ok and c.our_norm.ok):
            continue
        if not c.our_g2p.ok or c.our_g2p.value.bert_text != c.ref_bert.value:
            ours = c.our_g2p.value.bert_text if c.our_g2p.ok else c.our_g2p.error
            problems.append(f"{c.text!r}: hayakoe {c.ref_bert.value!r} != ours {ours!r}")
    _report(problems, "the BERT input text")


def _check_prepared(text: str, ref: tuple, ph, bert_text: str | None) -> str | None:
    norm_text, phone, tone, language, word2ph = ref
    mismatches = []
    if ph.norm_text != norm_text:
        mismatches.append(f"norm {norm_text!r} != {ph.norm_text!r}")
    if ph.phone_ids.tolist() != phone:
        mismatches.append(f"phone ids {phone} != {ph.phone_ids.tolist()}")
    if ph.tones.tolist() != tone:
        mismatches.append(f"tones {tone} != {ph.tones.tolist()}")
    if ph.languages.tolist() != language:
        mismatches.append(f"languages {language} != {ph.languages.tolist()}")
    if ph.word2ph != word2ph:
        mismatches.append(f"word2ph {word2ph} != {ph.word2ph}")
    if bert_text is not None and ph.bert_text != bert_text:
        mismatches.append(f"bert text {bert_text!r} != {ph.bert_text!r}")
    if any(x.dtype.name != "int64" for x in (ph.phone_ids, ph.tones, ph.languages)):
        mismatches.append("arrays are not int64")
    return f"{text!r}: " + "; ".join(mismatches) if mismatches else None


def test_prepare_phone_sequences_identical(run: dict[str, Any]) -> None:
    """The model inputs (ids with add_blank) — what actually reaches ONNX."""
    problems = []
    for c in _comparable(run):
        why = c.reference_failure()
        if why is not None:
            if not isinstance(c.our_phon.error, UnpronounceableText):
                problems.append(f"{c.text!r}: hayakoe fails ({why}), ours gave {c.our_phon!r}")
            continue
        if not c.our_phon.ok:
            problems.append(f"{c.text!r}: ours raised {c.our_phon.error!r}")
            continue
        issue = _check_prepared(c.text, c.ref_prep.value, c.our_phon.value, c.ref_bert.value)
        if issue:
            problems.append(issue)
    _report(problems, "prepare_phone_sequences")


def test_prepare_without_blank_and_jp_extra(run: dict[str, Any], oracle: Oracle, our_tokenizer) -> None:
    """Non-default model settings (no add_blank, pre-JP-Extra ``n``) on part of the corpus."""
    frontend = Frontend(our_tokenizer, add_blank=False, use_jp_extra=False)
    problems = []
    for c in _comparable(run)[::7]:
        ref = _attempt(oracle.prepare, c.text, oracle.hps_plain)
        ours = _attempt(frontend.phonemize, c.text)
        if not ref.ok or not c.ref_bert.ok:
            if not isinstance(ours.error, UnpronounceableText):
                problems.append(f"{c.text!r}: hayakoe raised {ref.error!r}, ours gave {ours!r}")
            continue
        if len(ref.value[4]) != len(c.ref_bert.value) + 2:
            if not isinstance(ours.error, UnpronounceableText):
                problems.append(f"{c.text!r}: hayakoe's BERT stage fails, ours gave {ours!r}")
            continue
        if not ours.ok:
            problems.append(f"{c.text!r}: ours raised {ours.error!r}")
            continue
        issue = _check_prepared(c.text, ref.value, ours.value, None)
        if issue:
            problems.append(issue)
    _report(problems, "prepare_phone_sequences (add_blank=False, version 2.0)")


def test_summary(run: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Report counts, the English-dictionary exceptions and hayakoe's failures."""
    cases = run["cases"]
    english = [c for c in cases if c.english_dict]
    compared = [c for c in cases if not c.english_dict]
    ref_failures = [c for c in compared if c.reference_failure() is not None]
    lines = [
        f"conformance: {len(cases)} inputs, {len(compared)} compared exactly, "
        f"{len(english)} skipped (hayakoe used its English dictionary), "
        f"{len(ref_failures)} where hayakoe raises; both implementations ran in {run['seconds']:.1f}s",
        "  English-dictionary inputs (first 10): "
        + ", ".join(f"{c.text[:30]!r} [{' '.join(c.english_dict)}]" for c in english[:10]),
        "  hayakoe failures:\n" + "\n".join(f"    {c.text[:24]!r}: {c.reference_failure()}" for c in ref_failures),
    ]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    # The corpus deliberately contains both kinds; if either disappears the
    # corresponding code paths are no longer exercised.
    assert english, "corpus has no input exercising hayakoe's English dictionary"
    assert ref_failures, "corpus has no input on which hayakoe raises"
    assert len(compared) >= 1000
