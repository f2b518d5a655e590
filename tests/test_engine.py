"""Engine behaviour a user relies on: chunked audio equals whole-sentence audio, clear errors, no torch."""

from __future__ import annotations

import dataclasses
import fcntl
import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile
from decoders import PausedBeforeCall, SlowDecoder, on_slices

from wyoming_hayakoe.engine import engine as engine_module
from wyoming_hayakoe.engine.decode_plan import (
    DECODE_CONTEXT_FRAMES,
    DECODE_FIRST_FRAMES,
    DECODE_MAX_FRAMES,
    decode_plan,
)
from wyoming_hayakoe.engine.engine import Engine, UnknownVoice, bounded_sentences
from wyoming_hayakoe.engine.pauses import MIN_PAUSE_SECONDS, gap_samples, trailing_silence
from wyoming_hayakoe.engine.settings import InvalidSettings, SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize
from wyoming_hayakoe.engine.voice import Voice
from wyoming_hayakoe.engine.voice_config import UnknownStyle
from wyoming_hayakoe.runtime.cache import ENTRY_LOCKS, ModelCache, cache_key
from wyoming_hayakoe.runtime.entry import FIRST_PIECE_FRAMES, MANIFEST
from wyoming_hayakoe.runtime.loading import load_voice
from wyoming_hayakoe.runtime.ort import OrtStreamingDecoder
from wyoming_hayakoe.runtime.request import RuntimeRequest
from wyoming_hayakoe.store import InvalidVoiceName, MissingModelFiles, find_bert, find_voice

VOICE = "standin-a"
QUIET = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)
LONG = "今日の東京は晴れのち曇り、最高気温は二十三度の予想ですが、午後から風が強くなるので、お出かけの際は十分にお気をつけください。"


@pytest.fixture(scope="module")
def engine(standin_dir: Path, model_cache: Path) -> Engine:
    return Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache)


def snr(reference: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / max(np.sum((reference - test) ** 2), 1e-30)))


@pytest.mark.parametrize("frames", [1, 12, 13, 48, 49, 300, 1000])
def test_decode_plan_covers_every_frame_once(frames: int) -> None:
    plan = decode_plan(frames)
    assert plan[0][0] == 0 and plan[-1][1] == frames
    assert all(a[1] == b[0] for a, b in zip(plan, plan[1:]))
    assert plan[0][1] - plan[0][0] <= DECODE_FIRST_FRAMES
    assert all(end - start <= DECODE_MAX_FRAMES for start, end in plan)


@pytest.mark.parametrize("frames", [1, 48, DECODE_MAX_FRAMES, DECODE_MAX_FRAMES + 1, 1000])
def test_later_sentences_are_decoded_in_few_even_slices(frames: int) -> None:
    plan = decode_plan(frames, quick_start=False)
    assert plan[0][0] == 0 and plan[-1][1] == frames
    assert all(a[1] == b[0] for a, b in zip(plan, plan[1:]))
    assert len(plan) == -(-frames // DECODE_MAX_FRAMES)  # no cut that is not needed
    sizes = [end - start for start, end in plan]
    assert max(sizes) - min(sizes) <= 1 and max(sizes) <= DECODE_MAX_FRAMES


def test_small_slices_only_for_the_first_sentence_where_the_decoder_cannot_stream(
    engine: Engine, standin_dir: Path, model_cache: Path, monkeypatch
) -> None:
    voice = engine.voice(VOICE)
    models = on_slices(voice, standin_dir, model_cache)
    assert models.decoder is not None
    counting = SlowDecoder(models.decoder, voice.sample_rate, 0.0)
    monkeypatch.setattr(voice, "models", dataclasses.replace(models, decoder=counting))
    monkeypatch.setattr(voice.speed, "factor", 0.2)  # a decoder five times faster than playback, held there
    monkeypatch.setattr(voice.speed, "record", lambda seconds, samples: None)
    sentence = "明日の朝七時にアラームをセットしました。"
    hop = voice.config.hop_length
    first = list(synthesize(engine, sentence, VOICE, QUIET))
    frames = sum(len(piece) for piece in first) // hop
    assert counting.calls == len(decode_plan(frames)) >= 3 and len(first) >= 2  # out before it is all decoded
    assert counting.frames[0] == DECODE_FIRST_FRAMES + DECODE_CONTEXT_FRAMES
    later = decode_plan(frames, quick_start=False)
    assert len(later) < len(decode_plan(frames))
    # After a long sentence, made faster than it plays, the next one needs no quick start.
    counting.calls = 0
    list(synthesize(engine, sentence + sentence, VOICE, QUIET))
    assert counting.calls == len(decode_plan(frames)) + len(later)


def test_a_decoder_slower_than_playback_starts_quickly_only_once(
    engine: Engine, standin_dir: Path, model_cache: Path, monkeypatch
) -> None:
    """Where the listener waits at every sentence anyway, later sentences skip the extra cuts."""
    voice = engine.voice(VOICE)
    sentence = "はい、わかりました。"
    hop = voice.config.hop_length
    frames = sum(len(piece) for piece in synthesize(engine, sentence, VOICE, QUIET)) // hop
    assert voice.speed.keeps_up and len(decode_plan(frames)) > len(decode_plan(frames, quick_start=False))
    models = on_slices(voice, standin_dir, model_cache)
    assert models.decoder is not None
    slow = SlowDecoder(models.decoder, voice.sample_rate, 1.5)  # 1.5 s per second of audio
    monkeypatch.setattr(voice, "models", dataclasses.replace(models, decoder=slow))
    monkeypatch.setattr(voice.speed, "factor", None)
    list(synthesize(engine, sentence + sentence, VOICE, QUIET))
    assert not voice.speed.keeps_up
    assert slow.calls == len(decode_plan(frames)) + len(decode_plan(frames, quick_start=False))


@pytest.mark.parametrize("text", ["はい。", "明日の朝七時にアラームをセットしました。", LONG, LONG + LONG])
def test_a_streaming_decoder_reads_each_frame_once_and_pads_no_chunk(engine: Engine, text: str, monkeypatch) -> None:
    """A first run, then equal chunks, reading a sentence's frames and then zeros until its last sample is
    out, never a frame twice as the slices' context is. A first run of free length (ONNX Runtime's) makes
    the last chunk end on the last sample, so nothing is padding; one of a chunk's length pads less than a
    chunk. What the runs compute is the sentence, less than a frame more: the first run skips the delay."""
    voice = engine.voice(VOICE)
    streaming = voice.models.streaming_decoder
    assert isinstance(streaming, OrtStreamingDecoder)
    hop, spec = voice.config.hop_length, streaming.spec
    counting = PausedBeforeCall(streaming, call=0)  # counts the runs, pauses none
    monkeypatch.setattr(voice, "models", dataclasses.replace(voice.models, streaming_decoder=counting))
    phonemes = voice.frontend.phonemize(text)
    latent, speaker = voice.front(phonemes, engine.bert.features(phonemes), QUIET)
    frames = latent.shape[2]
    pieces = list(voice.decode(latent, speaker))
    runs = streaming.plan(frames)
    assert sum(len(piece) for piece in pieces) == frames * hop
    assert counting.calls == len(pieces) == len(runs)
    needed = -(-(frames * hop + spec.delay) // hop)  # the sentence, and the delay until its last sample is out
    read = sum(run.frames for run in runs)
    assert needed <= read < needed + (spec.chunk_frames if streaming.first_frames else 1)
    assert sum(run.decoded for run in runs) == read * hop - spec.delay
    assert all(len(piece) == spec.chunk_frames * hop for piece in pieces[1:-1])  # every run between: a chunk


@pytest.mark.parametrize("text", ["はい。", LONG, "明日の朝七時にアラームをセットしました。"])
def test_streamed_and_sliced_decoding_equal_the_whole_model(
    engine: Engine, standin_dir: Path, model_cache: Path, text: str
) -> None:
    # The whole model runs on ONNX Runtime, so the split one does too: they match within rounding.
    voice = Engine.load([standin_dir], voices=[VOICE], cache_dir=model_cache, backend="onnxruntime").voice(VOICE)
    models = load_voice(
        find_voice([standin_dir], VOICE), ModelCache(model_cache), RuntimeRequest(), chunked=False
    ).models
    whole = Voice(VOICE, voice.config, voice.style_vectors, voice.frontend, models)
    sliced = Voice(VOICE, voice.config, voice.style_vectors, voice.frontend, on_slices(voice, standin_dir, model_cache))
    phonemes = voice.frontend.phonemize(text)
    bert = engine.bert.features(phonemes)
    reference = np.concatenate(list(whole.render(phonemes, bert, QUIET)))
    tail = 2 * voice.config.hop_length  # the last two frames: the end of a sentence is flushed, not cut
    for split in (voice, sliced):
        pieces = list(split.render(phonemes, bert, QUIET))
        audio = np.concatenate(pieces)
        assert len(audio) == len(reference)
        assert snr(reference, audio) >= 100.0 and snr(reference[-tail:], audio[-tail:]) >= 100.0
        if text == LONG:
            assert len(pieces) >= 3  # audio starts before the sentence is decoded
    streaming = voice.models.streaming_decoder
    assert streaming is not None and sliced.models.decoder is not None and whole.models.whole is not None
    assert isinstance(streaming, OrtStreamingDecoder)
    first = list(voice.render(phonemes, bert, QUIET))[0]  # at most a chunk and a first piece's frames
    assert len(first) < (streaming.spec.chunk_frames + FIRST_PIECE_FRAMES) * voice.config.hop_length


def test_synthesize_yields_pcm_with_pauses(engine: Engine) -> None:
    pieces = list(synthesize(engine, "はい。そうです。", VOICE, QUIET))
    assert all(p.dtype == np.int16 for p in pieces)
    audio = np.concatenate(pieces)
    assert np.abs(audio).max() > 1000  # not silent
    assert np.abs(audio).max() < 32767  # not clipped
    one = np.concatenate(list(synthesize(engine, "はい。", VOICE, QUIET)))
    two = np.concatenate(list(synthesize(engine, "そうです。", VOICE, QUIET)))
    rate = engine.voice(VOICE).sample_rate
    gap = len(audio) - len(one) - len(two)  # zeros added between the sentences
    assert gap >= 0
    # The gap tops the first sentence's own trailing silence up to the predicted pause (>= 80 ms);
    # measured here on 16-bit audio, so allow one 10 ms window of difference.
    target = engine.boundary_pauses(engine.voice(VOICE), "はい。そうです。", 2, QUIET).target(0)
    expected = gap_samples(trailing_silence(one / 32767.0, rate), target, rate)
    assert target >= MIN_PAUSE_SECONDS and expected > 0
    assert abs(gap - expected) <= rate // 100 + 1


def test_empty_text_gives_no_audio(engine: Engine) -> None:
    assert list(synthesize(engine, "", VOICE)) == []


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda e: list(synthesize(e, "はい", "nobody")), UnknownVoice),
        (lambda e: list(synthesize(e, "はい", VOICE, SynthesisSettings(style="Sleepy"))), UnknownStyle),
        (lambda e: SynthesisSettings(length_scale=0), InvalidSettings),
        (lambda e: SynthesisSettings(sdp_ratio=float("nan")), InvalidSettings),
    ],
)
def test_bad_requests_raise_clear_errors(engine: Engine, call, error) -> None:
    with pytest.raises(error) as raised:
        call(engine)
    assert str(raised.value)


def test_missing_models_say_what_to_download(tmp_path: Path) -> None:
    with pytest.raises(MissingModelFiles) as raised:
        Engine.load([tmp_path], voices=["jvnv-F1-jp"])
    assert "onnx/bert/q8/bert_q8.onnx" in str(raised.value)
    assert "wyoming-hayakoe-download" in str(raised.value)


def test_path_like_voice_names_are_refused(standin_dir: Path, model_cache: Path) -> None:
    for name in ["../standin-a", "/etc", "standin-a/../../x", "..", ""]:
        with pytest.raises(InvalidVoiceName):
            Engine.load([standin_dir], voices=[name], cache_dir=model_cache)


def test_runaway_sentences_are_cut_at_a_comma() -> None:
    sentence = "あ" * 250 + "、" + "い" * 250
    pieces = bounded_sentences([sentence], limit=300)
    assert "".join(pieces) == sentence
    assert pieces[0].endswith("、") and all(len(p) <= 300 for p in pieces)


def run_speak(standin_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "wyoming_hayakoe.cli.speak", "--data-dir", str(standin_dir), *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=300)


def test_speak_cli_writes_a_wav_without_torch(standin_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.wav"
    done = run_speak(
        standin_dir,
        "--voice",
        VOICE,
        "--style",
        "Happy",
        "--noise-scale",
        "0",
        "--output",
        str(out),
        stdin="こんにちは。今日はいい天気ですね。",
    )
    assert done.returncode == 0, done.stderr
    audio, rate = soundfile.read(out, dtype="int16")
    info = soundfile.info(out)
    assert (rate, info.channels, info.subtype) == (44100, 1, "PCM_16")
    assert 0.5 < len(audio) / rate < 10 and np.abs(audio).max() > 1000
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, runpy; sys.argv=['speak', '--data-dir', sys.argv[1], '--voice', 'standin-a', "
            "'--text', 'はい', '--output', sys.argv[2]]\ntry: runpy.run_module('wyoming_hayakoe.cli.speak', run_name='__main__')\n"
            "except SystemExit: pass\nprint(sorted(m for m in ('torch', 'hayakoe', 'onnx') if m in sys.modules))",
            str(standin_dir),
            str(tmp_path / "probe.wav"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.stdout.strip().endswith("[]"), probe.stdout + probe.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--voice", "nobody", "--text", "はい"], "Voice 'nobody' not found"),
        (["--voice", VOICE, "--style", "Sleepy", "--text", "はい"], "Neutral"),
        (["--voice", "../etc", "--text", "はい"], "Invalid voice name"),
        (["--voice", VOICE, "--length-scale", "-1", "--text", "はい"], "length_scale"),
        (["--voice", VOICE, "--text", "   "], "no text"),
    ],
)
def test_speak_cli_errors_are_clear(standin_dir: Path, tmp_path: Path, args: list[str], message: str) -> None:
    done = run_speak(standin_dir, *args, "--output", str(tmp_path / "x.wav"))
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("missing-folder/x.wav", "does not exist"),
        (".", "is a folder"),
        ("speech", "(no extension)"),
        ("speech.aac", "unknown audio format '.aac'"),
    ],
)
def test_speak_cli_checks_the_output_before_loading_anything(tmp_path: Path, output: str, message: str) -> None:
    # An empty data dir: had the models been looked up first, the error would be about them.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "wyoming_hayakoe.cli.speak",
            "--data-dir",
            str(tmp_path),
            "--voice",
            VOICE,
            "--text",
            "はい",
            "--output",
            output,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "--output" in done.stderr
    assert "Traceback" not in done.stderr and "bert" not in done.stderr


@pytest.mark.parametrize(
    ("suffix", "container"), [(".wav", "WAV"), (".flac", "FLAC"), (".ogg", "OGG"), (".mp3", "MP3")]
)
def test_speak_cli_writes_the_format_its_extension_names(
    standin_dir: Path, tmp_path: Path, suffix: str, container: str
) -> None:
    out = tmp_path / f"speech{suffix.upper()}"  # the extension's case does not matter
    done = run_speak(standin_dir, "--voice", VOICE, "--text", "こんにちは。", "--output", str(out))
    assert done.returncode == 0, done.stderr
    info = soundfile.info(out)
    assert (info.format, info.samplerate, info.channels) == (container, 44100, 1)
    assert info.duration > 0.2


def test_speak_cli_writes_wav_to_standard_output(standin_dir: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "wyoming_hayakoe.cli.speak",
        "--data-dir",
        str(standin_dir),
        "--voice",
        VOICE,
        "--text",
        "こんにちは。",
        "--output",
        "-",
    ]
    done = subprocess.run(cmd, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    audio, rate = soundfile.read(io.BytesIO(done.stdout), dtype="int16")
    assert rate == 44100 and len(audio) / rate > 0.2 and np.abs(audio).max() > 1000
    assert b"standard output" in done.stderr


def test_a_first_start_prepares_the_bert_beside_the_voices(standin_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """Where cores and memory allow, the voices' models are optimized while the BERT's are."""
    monkeypatch.setattr(engine_module, "prepares_side_by_side", lambda: True)
    cache = ModelCache(tmp_path / "cache")
    bert_lock = cache.folder / ENTRY_LOCKS / cache_key(find_bert([standin_dir]).onnx, split=False)
    bert_lock.parent.mkdir()
    loaded: list[Engine] = []
    with open(bert_lock, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the BERT's optimization held back
        starting = threading.Thread(
            target=lambda: loaded.append(Engine.load([standin_dir], voices=[VOICE], cache_dir=cache.folder))
        )
        starting.start()
        deadline = time.monotonic() + 120
        while not find_voice_entry(cache.folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        prepared_beside = find_voice_entry(cache.folder)
    starting.join(timeout=300)
    assert prepared_beside, "the voice was not prepared while the BERT was"
    assert loaded and list(synthesize(loaded[0], "こんにちは。", VOICE, QUIET))


def test_the_last_voices_duration_predictor_is_prepared_beside_its_synthesizer(
    standin_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """The small duration predictors are optimized while the last synthesizer is, not after it: a
    first start's last voice then loads as soon as its synthesizer is made."""
    monkeypatch.setattr(engine_module, "prepares_side_by_side", lambda: True)
    cache = ModelCache(tmp_path / "cache")
    last = find_voice([standin_dir], "standin-b")
    assert last.duration_predictor is not None
    synthesizer_lock = cache.folder / ENTRY_LOCKS / cache_key(last.synthesizer, split=True, request=RuntimeRequest())
    synthesizer_lock.parent.mkdir()
    loaded: list[Engine] = []
    with open(synthesizer_lock, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the last synthesizer's optimization held back
        starting = threading.Thread(
            target=lambda: loaded.append(
                Engine.load([standin_dir], voices=[VOICE, "standin-b"], cache_dir=cache.folder)
            )
        )
        starting.start()
        deadline = time.monotonic() + 120
        while not (prepared := has_entry_of(cache.folder, last.duration_predictor)) and time.monotonic() < deadline:
            time.sleep(0.2)
    starting.join(timeout=300)
    assert prepared, "the last voice's duration predictor waited for its synthesizer"
    assert loaded and list(synthesize(loaded[0], "こんにちは。", "standin-b", QUIET))


def has_entry_of(folder: Path, source: Path) -> bool:
    return any(f'"{source.resolve()}"' in m.read_text() for m in folder.glob(f"*/{MANIFEST}"))


def find_voice_entry(folder: Path) -> bool:
    return any('synthesizer.onnx"' in m.read_text() for m in folder.glob(f"*/{MANIFEST}"))


@pytest.mark.parametrize(
    ("cores", "available", "side_by_side"),
    [(2, 8 << 30, True), (1, 8 << 30, False), (4, 2 << 30, False), (4, None, False)],
)
def test_the_bert_is_prepared_beside_the_voices_only_with_room_for_both(
    monkeypatch, cores: int, available: int | None, side_by_side: bool
) -> None:
    monkeypatch.setattr(engine_module.os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(engine_module, "available_memory", lambda: available)
    assert engine_module.prepares_side_by_side() is side_by_side
