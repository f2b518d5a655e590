"""Models optimized once into the cache: reused, rebuilt when the model changes, errors reported."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from wyoming_hayakoe.runtime.cache import ENTRY_LOCKS, LOCK, ModelCache, PreparationError, cache_key
from wyoming_hayakoe.runtime.children import ChildStop
from wyoming_hayakoe.runtime.entry import DECODER, DECODER_FIRST, DECODER_STEP, FRONT, MANIFEST, WHOLE
from wyoming_hayakoe.runtime.ort import decode_streaming, open_session, open_step_model

DP = Path("onnx") / "speakers" / "standin-a" / "duration_predictor.onnx"
SYNTH = Path("onnx") / "speakers" / "standin-a" / "synthesizer.onnx"


def entries(folder: Path) -> list[Path]:
    return sorted(m.parent for m in folder.glob(f"*/{MANIFEST}"))


@pytest.fixture
def model(tmp_path: Path, standin_dir: Path) -> Path:
    """A copy of a small real model, free to be changed by the test."""
    copy = tmp_path / "models" / "duration_predictor.onnx"
    copy.parent.mkdir()
    shutil.copy(standin_dir / DP, copy)
    return copy


def tiny_graph(path: Path) -> Path:
    """A valid model with an `audio` output but no HiFi-GAN decoder to cut at."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["audio"])],
        "no-decoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [None])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_second_prepare_reuses_the_entry_without_a_child(model: Path, tmp_path: Path, monkeypatch) -> None:
    cache = ModelCache(tmp_path / "cache")
    first = cache.prepare(model)
    assert entries(cache.folder) == [first.parts[WHOLE].parent]
    assert first.parts[WHOLE].with_name("model.onnx.data").stat().st_size > 1024  # weights beside the graph

    def no_child(*args, **kwargs):
        raise AssertionError("a cached model was optimized again")

    monkeypatch.setattr(subprocess, "Popen", no_child)
    again = ModelCache(tmp_path / "cache").prepare(model)
    assert again == first


def test_optimized_model_computes_what_the_source_does(model: Path, tmp_path: Path) -> None:
    prepared = ModelCache(tmp_path / "cache").prepare(model)
    source = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = {}
    rng = np.random.default_rng(0)
    for spec in source.get_inputs():
        shape = [d if isinstance(d, int) else 7 for d in spec.shape]
        if spec.name == "bert":
            shape = [1, 1024, 7]
        if spec.name in ("sdp_ratio", "noise_scale_w"):
            feeds[spec.name] = np.zeros(1, dtype=np.float32)  # no random noise: comparable runs
        elif spec.name == "x_lengths":
            feeds[spec.name] = np.array([7], dtype=np.int64)
        elif spec.type == "tensor(int64)":
            feeds[spec.name] = rng.integers(0, 2, size=shape).astype(np.int64)  # valid ids, tones, language
        else:
            feeds[spec.name] = rng.random(shape).astype(np.float32)
    expected = source.run(None, feeds)
    got = open_session(prepared.parts[WHOLE], threads=1).run(None, feeds)
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_a_changed_model_is_optimized_again_and_the_old_entry_removed(model: Path, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    old = cache.prepare(model).parts[WHOLE].parent
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # e.g. a new download
    new = cache.prepare(model).parts[WHOLE].parent
    assert new != old
    assert entries(cache.folder) == [new]


def test_split_and_whole_entries_of_one_synthesizer_live_side_by_side(standin_dir: Path, model_cache: Path) -> None:
    cache = ModelCache(model_cache)
    split = cache.prepare(standin_dir / SYNTH, split=True)
    whole = cache.prepare(standin_dir / SYNTH, split=False)
    assert set(split.parts) == {FRONT, DECODER, DECODER_STEP, DECODER_FIRST} and split.latent and split.speaker
    assert split.stream is not None and split.stream.chunk_frames > split.stream.delay / split.stream.hop
    assert set(whole.parts) == {WHOLE} and not whole.unsplit_reason
    assert all(p.is_file() for p in [*split.parts.values(), *whole.parts.values()])


def test_the_step_model_and_its_first_run_read_one_mapping_of_their_weights(
    standin_dir: Path, model_cache: Path
) -> None:
    """Both graphs' weights are in the step model's file, which the two sessions read from one mapping:
    ONNX Runtime maps a file for each session, and the process's RSS would count its pages twice."""
    split = ModelCache(model_cache).prepare(standin_dir / SYNTH, split=True)
    weights = split.shared_weights
    assert weights is not None and weights.file == split.parts[DECODER_STEP].with_name("decoder_step.onnx.data")
    assert not split.parts[DECODER_FIRST].with_name("decoder_first.onnx.data").exists()
    size = weights.file.stat().st_size
    step, first = ({(t.offset, t.nbytes) for t in weights.tensors[part]} for part in (DECODER_STEP, DECODER_FIRST))
    assert sum(nbytes for _, nbytes in step) == size and first < step  # the first run's: the weights
    assert split.stream is not None
    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, 32, 70)).astype(np.float32)  # the tiny stand-in's inter_channels and gin_channels
    g = rng.standard_normal((1, 64, 1)).astype(np.float32)
    decoders = [open_step_model(split.parts, split.stream, 1, weights)]
    shared = decode_streaming(decoders[0], z, g)
    assert resident_bytes(weights.file) <= 1.1 * size
    decoders.append(open_step_model(split.parts, split.stream, 1, None))  # each session mapping its own
    np.testing.assert_allclose(shared, decode_streaming(decoders[1], z, g), atol=1e-6)
    assert resident_bytes(weights.file) > 1.5 * size


def resident_bytes(path: Path) -> int:
    """The resident bytes of this process's mappings of `path` (counted again for each mapping)."""
    total, counting = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0]:  # a mapping's first line: addresses, ..., its path
            counting = line.rstrip().endswith(str(path.resolve()))
        elif counting and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


def test_a_synthesizer_without_a_decoder_to_cut_is_kept_whole_with_the_reason(tmp_path: Path) -> None:
    prepared = ModelCache(tmp_path / "cache").prepare(tiny_graph(tmp_path / "synthesizer.onnx"), split=True)
    assert set(prepared.parts) == {WHOLE}
    assert "conv_pre" in prepared.unsplit_reason


def test_a_broken_model_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "bert_q8.onnx"
    broken.write_bytes(b"this is not an onnx file")
    cache = ModelCache(tmp_path / "cache")
    with pytest.raises(PreparationError, match=r"Could not optimize .*bert_q8\.onnx: \S"):
        cache.prepare(broken)
    assert entries(cache.folder) == []
    assert {p.name for p in cache.folder.iterdir()} <= {LOCK, ENTRY_LOCKS}  # no half-built entry left


def test_an_unusable_cache_folder_falls_back_to_a_temporary_one(model: Path, tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cache = ModelCache(blocker / "cache")
    assert "not writable" in caplog.text
    prepared = cache.prepare(model)
    assert prepared.parts[WHOLE].is_file() and not str(prepared.parts[WHOLE]).startswith(str(blocker))


def test_a_half_written_entry_is_rebuilt(model: Path, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    entry = cache.prepare(model).parts[WHOLE].parent
    (entry / "model.onnx").unlink()  # e.g. removed by hand, or a disk that filled up
    rebuilt = cache.prepare(model)
    assert rebuilt.parts[WHOLE] == entry / "model.onnx" and rebuilt.parts[WHOLE].is_file()
    open_session(rebuilt.parts[WHOLE], threads=1)


def test_server_reports_a_broken_model_and_exits(standin_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(standin_dir, data, ignore=shutil.ignore_patterns("standin-b"))
    (data / SYNTH).write_bytes(b"garbage")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "wyoming_hayakoe",
            "--uri",
            "tcp://127.0.0.1:0",
            "--data-dir",
            str(data),
            "--voice",
            "standin-a",
            "--no-download",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "Could not optimize" in done.stderr and "synthesizer.onnx" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("part", ["../../elsewhere.onnx", "/etc/hostname", "", 7])
def test_a_manifest_cannot_point_outside_its_entry(model: Path, tmp_path: Path, part) -> None:
    cache = ModelCache(tmp_path / "cache")
    entry = cache.prepare(model).parts[WHOLE].parent
    (entry / MANIFEST).write_text(json.dumps({"source": str(model), "split": False, "parts": {WHOLE: part}}))
    rebuilt = cache.prepare(model)  # not trusted: made again
    assert rebuilt.parts[WHOLE] == entry / "model.onnx" and rebuilt.parts[WHOLE].is_file()


def test_a_truncated_weights_file_is_noticed_and_rebuilt(model: Path, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    entry = cache.prepare(model).parts[WHOLE].parent
    weights = entry / "model.onnx.data"
    weights.write_bytes(weights.read_bytes()[:1000])  # e.g. a power cut while it was written
    rebuilt = cache.prepare(model)
    assert (rebuilt.parts[WHOLE].parent / "model.onnx.data").stat().st_size > 1000
    open_session(rebuilt.parts[WHOLE], threads=1)


def test_leftovers_of_a_stopped_build_are_cleared(model: Path, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    stale = cache.folder / ".building-abc123"
    stale.mkdir()
    (stale / "model.onnx.data").write_bytes(b"\0" * 4096)
    cache.prepare(model)
    assert not stale.exists()
    assert [p.name for p in cache.folder.iterdir() if p.name.startswith(".building-")] == []


def test_servers_starting_together_optimize_once(model: Path, tmp_path: Path) -> None:
    script = (
        "import logging, sys\nfrom pathlib import Path\nfrom wyoming_hayakoe.runtime.cache import ModelCache\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "print(ModelCache(Path(sys.argv[1])).prepare(Path(sys.argv[2])).parts['model'])"
    )
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "cache"), str(model)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [p.communicate(timeout=300) for p in starts]
    assert all(p.returncode == 0 for p in starts), results
    assert len({out.strip() for out, _ in results}) == 1
    assert len(entries(tmp_path / "cache")) == 1
    assert sum("Optimizing" in err for _, err in results) == 1  # the others found it made


def test_a_killed_optimizer_is_reported_as_such(model: Path, tmp_path: Path, monkeypatch) -> None:
    popen = subprocess.Popen

    def killed(command, **kwargs):  # an optimizer the kernel kills, as when memory runs out
        return popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", killed)
    with pytest.raises(PreparationError, match="killed by SIGKILL.*out of memory"):
        ModelCache(tmp_path / "cache").prepare(model)


def test_a_stop_while_the_optimizer_starts_still_stops_it(model: Path, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C in a command line that optimizes a model in its main thread (wyoming-hayakoe-speak, the
    benchmark) just as Popen has started the child: held until the child can be stopped, then raised."""
    popen, started = subprocess.Popen, []

    def interrupted(*args, **kwargs):  # Ctrl-C arrives while Popen is still starting the child
        started.append(popen(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGINT)
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", interrupted)
    cache = ModelCache(tmp_path / "cache")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, whatever ran before
    try:
        with pytest.raises(KeyboardInterrupt):
            cache.prepare(model)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert started and started[0].poll() is not None, "the optimizer was left running"
    assert list(cache.folder.glob(".building-*")) == []


def test_a_full_disk_is_a_clear_error(model: Path, tmp_path: Path, monkeypatch) -> None:
    import errno
    import tempfile

    cache = ModelCache(tmp_path / "cache")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    with pytest.raises(PreparationError, match=r"has no room for it \(\d+ MB free; .*No space left.*\).*--cache-dir"):
        cache.prepare(model)


def test_another_model_is_optimized_while_one_is_being_built(model: Path, tmp_path: Path) -> None:
    """Each entry has its own lock: a model waits only for a build of the same model, never for another's."""
    other = tmp_path / "other" / model.name
    other.parent.mkdir()
    shutil.copy(model, other)
    cache = ModelCache(tmp_path / "cache")
    busy = cache.folder / ENTRY_LOCKS / cache_key(model, split=False)
    busy.parent.mkdir(exist_ok=True)
    with open(busy, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a process building `model` right now holds it
        assert cache.prepare(other).parts[WHOLE].is_file()
        waiting = threading.Thread(target=cache.prepare, args=(model,))
        waiting.start()
        waiting.join(timeout=3)
        assert waiting.is_alive()  # the same model waits for the build in progress
        assert len(entries(cache.folder)) == 1
    waiting.join(timeout=300)
    assert not waiting.is_alive()
    assert len(entries(cache.folder)) == 2


def test_a_stop_ends_every_child_it_watches() -> None:
    """A failed or stopped first start ends all the optimizers working beside it, not only the latest."""
    stop = ChildStop()
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], text=True) for _ in range(2)]
    try:
        for child in children:
            stop.watch(child)
        stop.stop()
        assert [child.wait(timeout=10) for child in children] == [-signal.SIGTERM] * 2
        late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], text=True)
        stop.watch(late)  # one started after the stop is ended at once
        assert late.wait(timeout=10) == -signal.SIGTERM
    finally:
        for child in children:
            child.kill()
