"""OpenVINO as a second runtime: same audio as ONNX Runtime, chosen by measurement, never when it disagrees."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import ha_client as ha
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from wyoming_hayakoe.engine.engine import Engine
from wyoming_hayakoe.engine.settings import SynthesisSettings
from wyoming_hayakoe.engine.speech import synthesize, warm_up
from wyoming_hayakoe.runtime import cache as cache_module
from wyoming_hayakoe.runtime import measure, optimize
from wyoming_hayakoe.runtime.cache import ModelCache, PreparationError
from wyoming_hayakoe.runtime.children import ChildStop
from wyoming_hayakoe.runtime.deconv import conv_transposes_need_widening, widen_conv_transposes
from wyoming_hayakoe.runtime.entry import MANIFEST, STEP_PARTS, PreparedModel
from wyoming_hayakoe.runtime.measure import snr_db
from wyoming_hayakoe.runtime.openvino import OvSession, core
from wyoming_hayakoe.runtime.reference import Reference, made_up
from wyoming_hayakoe.runtime.request import RuntimeRequest, native_lower_precision
from wyoming_hayakoe.runtime.split import split_synthesizer

VOICE = "standin-a"
SYNTH = Path("onnx") / "speakers" / VOICE / "synthesizer.onnx"
TEXT = "こんにちは。今日は良い天気ですね。散歩に行きましょう！"
RATE = 44100  # the stand-ins'


def conv_transpose_kernels(model: onnx.ModelProto) -> list[list[int]]:
    return [
        next(list(a.ints) for a in node.attribute if a.name == "kernel_shape")
        for node in model.graph.node
        if node.op_type == "ConvTranspose"
    ]


@pytest.mark.parametrize(
    ("machine", "widened"), [("aarch64", True), ("arm64", True), ("armv7l", True), ("x86_64", False), ("AMD64", False)]
)
def test_only_arm_gets_the_2d_conv_transposes(machine: str, widened: bool) -> None:
    """ARM's plugin computes a 1-D ConvTranspose wrongly; on x86 the 2-D form is right but takes a slower kernel."""
    assert conv_transposes_need_widening(machine) is widened


def test_decoder_has_a_static_rank_and_only_2d_conv_transposes_with_the_same_audio(standin_dir: Path) -> None:
    halves = split_synthesizer(standin_dir / SYNTH)
    original = onnx.load_from_string(halves.decoder)
    assert all(len(kernel) == 1 for kernel in conv_transpose_kernels(original))  # what the rewrite is for
    widened = onnx.load_from_string(halves.decoder)
    assert widen_conv_transposes(widened) == len(conv_transpose_kernels(original)) > 0
    assert [len(k) for k in conv_transpose_kernels(widened)] == [2] * len(conv_transpose_kernels(original))

    rng = np.random.default_rng(1)
    channels = next(i.dims[1] for i in original.graph.initializer if "conv_pre" in i.name and len(i.dims) == 3)
    speaker = next(i.dims[1] for i in original.graph.initializer if ".cond." in i.name and len(i.dims) == 3)
    feeds = {
        halves.latent: rng.standard_normal((1, channels, 60)).astype(np.float32),
        halves.speaker: rng.standard_normal((1, speaker, 1)).astype(np.float32),
    }
    reference = ort.InferenceSession(halves.decoder).run(["audio"], feeds)[0]
    rewritten = ort.InferenceSession(widened.SerializeToString()).run(["audio"], feeds)[0]
    assert rewritten.shape == reference.shape
    assert snr_db(reference, rewritten) >= 120.0
    decoded = {}
    for name, graph in (("original", original), ("widened", widened)):
        # OpenVINO's ONNX reader needs the inputs' rank ([1, C, T], [1, G, 1]) to take either.
        compiled = core().compile_model(
            core().read_model(graph.SerializeToString(), b""), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
        )
        decoded[name] = OvSession(compiled, Path(name)).run(["audio"], feeds)[0]
    # Only the widened graph, which OpenVINO is given, must agree everywhere: on ARM, OpenVINO's
    # plugin computes the original's 1-D ConvTranspose wrongly (0.6 dB under emulation).
    assert snr_db(reference, decoded["widened"]) >= 100.0
    onnx.checker.check_model(widened)


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [
        ("flags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n", "bf16"),
        ("flags\t\t: fpu sse2 avx2 amx_bf16 amx_tile\n", "bf16"),
        ("flags\t\t: fpu sse2 avx2 avx512f avx512_fp16\n", None),  # x86 f16 is not offered: bf16 is its own
        ("Features\t: fp asimd evtstrm crc32 cpuid\nCPU part\t: 0xd08\n", None),  # Cortex-A72, a Pi 4: storage only
        (
            "Features\t: fp asimd evtstrm aes crc32 atomics fphp asimdhp cpuid asimddp\nCPU part\t: 0xd0b\n",
            "f16",
        ),  # A76
        (
            "Features\t: fp asimd evtstrm crc32 atomics fphp asimdhp asimdrdm lrcpc dcpop asimddp\n",
            "f16",
        ),  # A55, HA Green
        ("Features\t: fp asimd fphp asimdhp sve bf16 i8mm\n", "f16"),  # Neoverse V1: OpenVINO's ARM plugin runs f16
        ("processor\t: 0\n", None),  # neither line
    ],
)
def test_the_lower_precision_offered_is_the_one_the_cpu_computes_natively(cpuinfo: str, native: str | None) -> None:
    assert native_lower_precision(cpuinfo) == native


def manifests(folder: Path) -> dict[str, dict]:
    """Each entry's manifest by what it was made from: synthesizer or duration predictor."""
    found = {}
    for path in folder.glob(f"*/{MANIFEST}"):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        found[Path(manifest["source"]).name] = manifest
    return found


async def speak(server: ha.ServerProcess) -> np.ndarray:
    result = await ha.synthesize(server.host, server.port, TEXT, voice=VOICE)
    assert result.error is None and result.audio
    return np.frombuffer(bytes(result.audio), dtype=np.int16).astype(np.float64)


# bf16: native on x86 with AVX512_BF16 or AMX; f16: native on ARMv8.2+, on x86 where OpenVINO's plugin takes the hint
@pytest.mark.parametrize("precision", ["f32", "bf16", "f16"])
async def test_openvino_speaks_as_onnxruntime_does_through_the_protocol(
    standin_dir: Path, tmp_path: Path, precision: str
) -> None:
    capability = {"f32": "FP32", "bf16": "BF16", "f16": "FP16"}[precision]  # as OpenVINO's CPU plugin names them
    if capability not in core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip(f"OpenVINO's CPU plugin does not compute {precision} on this CPU (the qemu check covers ARM)")
    audio = {}
    for backend in ("onnxruntime", "openvino"):
        args = ("--voice", VOICE, "--load-voice", VOICE, *ha.SHARED_ARGS, "--threads", "2")
        args += ("--backend", backend, "--cache-dir", str(tmp_path / "cache"))
        args += ("--precision", precision) if backend == "openvino" else ()
        with ha.ServerProcess(standin_dir, *args).start(timeout=300) as server:
            audio[backend] = await speak(server)
            log = server.log
        if backend == "openvino":
            assert f"Voice {VOICE} decoder: " in log and f"-> openvino {precision}" in log, log
    assert len(audio["openvino"]) == len(audio["onnxruntime"])
    if precision == "f32":
        assert snr_db(audio["onnxruntime"], audio["openvino"]) >= 60.0  # 16-bit samples: their rounding is the floor
    else:  # as the server's own gate judges it
        assert not measure.judge(audio["onnxruntime"], audio["openvino"], precision, RATE).problem


async def test_auto_measures_after_the_start_records_the_choice_and_logs_it_at_every_start(
    standin_dir: Path, tmp_path: Path
) -> None:
    args = ("--voice", VOICE, "--load-voice", VOICE, *ha.SHARED_ARGS, "--threads", "2")
    args += ("--cache-dir", str(tmp_path / "cache"))
    logs = []
    for _ in range(2):  # the first start serves, then measures; the second reads the manifest
        with ha.ServerProcess(standin_dir, *args).start(timeout=300) as server:
            await speak(server)
            assert server.wait_for_log("measured after the start" if not logs else "Listening on", timeout=300)
            logs.append(server.log)
    first, warm = logs
    listening = first.index("Listening on")
    assert "measuring decoder_step on onnxruntime (step 1 of 1, " in first[listening:]  # measured while serving
    assert "measuring" not in first[:listening]
    assert "Optimizing" not in warm and "step " not in warm and "measured after the start" not in warm
    recorded = manifests(tmp_path / "cache")
    assert recorded["duration_predictor.onnx"]["runtimes"] == {}  # whole texts: ONNX Runtime gives memory back
    synthesizer = recorded["synthesizer.onnx"]
    assert set(synthesizer["runtimes"]) == {"decoder_step"}  # only the step model is measured
    decoder = synthesizer["runtimes"]["decoder_step"]
    assert {"onnxruntime f32", "openvino f32"} <= set(decoder["seconds"])
    assert all(seconds > 0 for seconds in decoder["seconds"].values())
    assert decoder["snr_db"]["openvino f32"] >= 100.0
    chosen = f"{decoder['backend']} {decoder['precision']}"
    assert chosen in decoder["seconds"] and chosen not in decoder["failed"]
    passing = {k: v for k, v in decoder["seconds"].items() if k not in decoder["failed"]}
    assert decoder["seconds"][chosen] == min(passing.values())
    on_ort = decoder["backend"] == "onnxruntime"
    suffix = ".onnx" if on_ort else ".xml"  # the step model and its first run's graph, on the chosen runtime
    assert {part: synthesizer["parts"][part] for part in STEP_PARTS} == {part: part + suffix for part in STEP_PARTS}
    assert ("shared_weights" in synthesizer) is on_ort  # ONNX Runtime's sessions share them
    lower = native_lower_precision()
    if lower is not None:  # tried, and kept only if it agrees with f32 closely enough
        assert f"openvino {lower}" in decoder["seconds"]
    line = f"Voice {VOICE} decoder: "
    for log in logs:
        assert any(line in entry and "per 100 frames ->" in entry for entry in log.splitlines()), log
    assert "unmeasured" not in synthesizer and not set(STEP_PARTS.values()) & set(synthesizer["files"])
    assert not list((tmp_path / "cache").glob("*/*.plain.onnx"))  # kept only until measured


def run_child_in_process(command: list[str], label: str, stop=None) -> subprocess.CompletedProcess[str]:
    """The cache's children (optimizing, measuring), run in this process, so a test can change what OpenVINO computes."""
    arguments = command[3:]
    if "--parent" in arguments:  # it is this process, not a child that dies with it
        at = arguments.index("--parent")
        del arguments[at : at + 2]
    if command[2] == cache_module.MEASURER:
        entry, request, reference, _ = measure.parse_args(arguments)
        measure.measure_entry(entry, request, Reference.load(reference))
    else:
        optimize.main(arguments)
    return subprocess.CompletedProcess(command, 0, None, "")


def prepared_and_measured(cache: ModelCache, source: Path, request: RuntimeRequest) -> PreparedModel:
    """A synthesizer's entry with its decoder's runtime chosen, as a server has it after measuring in the background."""
    prepared = cache.prepare(source, split=True, request=request)
    if not prepared.unmeasured:
        return prepared
    with tempfile.TemporaryDirectory() as folder:  # the server hands its voice's reference passage over
        reference = Path(folder) / "reference.npz"
        made_up(prepared.parts["front"], prepared.latent, prepared.speaker, None, RATE).save(reference)
        return cache.measure(prepared, request, source.name, ChildStop(), reference)


def load_measured(*args, **kwargs) -> Engine:
    """`Engine.load`, then its voices measured at once (a server measures them in the background)."""
    engine = Engine.load(*args, **kwargs)
    if engine.measuring is not None:
        engine.measuring.run_now()
    return engine


@pytest.mark.parametrize("backend", ["auto", "openvino"])
def test_a_disagreeing_openvino_is_never_chosen_and_the_log_says_why(
    standin_dir: Path, tmp_path: Path, monkeypatch, caplog, backend: str
) -> None:
    run = OvSession.run

    def off_by_a_little(self, output_names, input_feed):  # like the ARM plugin's wrong 1-D ConvTranspose
        audio, *states = run(self, output_names, input_feed)  # the step model's state is left as it is
        return [np.asarray(audio) * 1.01, *states]

    monkeypatch.setattr(OvSession, "run", off_by_a_little)
    monkeypatch.setattr(cache_module, "run_child", run_child_in_process)
    caplog.set_level(logging.INFO)
    engine = load_measured(
        [standin_dir], voices=[VOICE], cache_dir=tmp_path / "cache", backend=backend, precision="f32"
    )  # f32 alone: a 1 % error may still pass the lower precisions' gate
    voice = engine.voice(VOICE)
    choice = voice.runtimes["decoder"]
    assert choice.backend == "onnxruntime"
    assert "below 100 dB" in choice.failed["openvino f32"] and choice.snr_db["openvino f32"] < 100
    assert type(voice.models.streaming_decoder.session).__name__ == "ShrinkingSession"  # no OpenVINO model kept
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"Voice {VOICE} decoder:")]
    assert "openvino f32 rejected: SNR 40.0 dB against onnxruntime f32, below 100 dB" in lines[-1]
    assert len(lines) == (2 if backend == "auto" else 1)  # auto: as it starts, and once measured
    if backend == "openvino":
        assert "openvino was asked for but failed its check" in lines[0]


def openvino_wins(monkeypatch) -> None:
    """OpenVINO times itself at a millisecond, whatever this machine measures (it loses on the tiny model)."""
    timed = measure.best_time

    def faster_openvino(run, decoder):
        return 0.001 if isinstance(decoder.session, OvSession) else timed(run, decoder)

    monkeypatch.setattr(measure, "best_time", faster_openvino)


async def test_auto_switches_to_an_openvino_that_is_faster_and_agrees(
    standin_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """OpenVINO 2026.4 kept buffers for every input length of the old slices; the step model has one shape,
    so a faster OpenVINO is simply taken: the voice switches to it and still speaks as before."""
    monkeypatch.setattr(cache_module, "run_child", run_child_in_process)
    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=tmp_path / "cache", precision="f32")
    voice = engine.voice(VOICE)
    before = np.concatenate(list(synthesize(engine, TEXT, VOICE, SynthesisSettings(noise_scale=0, noise_w_scale=0))))
    assert type(voice.models.streaming_decoder.session).__name__ == "ShrinkingSession"  # serving before measuring
    openvino_wins(monkeypatch)
    assert engine.measuring is not None
    engine.measuring.run_now()
    assert voice.runtimes["decoder"].label == "openvino f32" and not voice.runtimes["decoder"].failed
    assert isinstance(voice.models.streaming_decoder.session, OvSession)
    after = np.concatenate(list(synthesize(engine, TEXT, VOICE, SynthesisSettings(noise_scale=0, noise_w_scale=0))))
    assert len(after) == len(before) and snr_db(before.astype(float), after.astype(float)) >= 60.0


def test_the_relay_logs_progress_while_the_child_still_runs(tmp_path: Path, monkeypatch, caplog) -> None:
    seen = tmp_path / "seen"
    popen = subprocess.Popen

    def waiting_child(command, **kwargs):  # says it is working, then waits until the log has shown that
        code = (
            "import os, sys, time\n"
            "print('progress 1 2 working on it', file=sys.stderr, flush=True)\n"
            "for _ in range(300):\n"
            "    if os.path.exists(sys.argv[1]): sys.exit(5)\n"
            "    time.sleep(0.1)\n"
        )
        return popen([sys.executable, "-c", code, str(seen)], **kwargs)

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "working on it (step 1 of 2, " in record.getMessage():
                seen.touch()

    monkeypatch.setattr(subprocess, "Popen", waiting_child)
    caplog.set_level(logging.INFO, logger="wyoming_hayakoe.runtime.children")
    handler = Seen()
    logging.getLogger("wyoming_hayakoe.runtime.children").addHandler(handler)
    try:
        with pytest.raises(PreparationError, match="exit code 5"):  # 5: it saw its line logged
            ModelCache(tmp_path / "cache").prepare(tmp_path / "model.onnx")
    finally:
        logging.getLogger("wyoming_hayakoe.runtime.children").removeHandler(handler)


@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_a_lower_precision_on_onnxruntime_is_a_clear_error(standin_dir: Path, precision: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wyoming_hayakoe.cli.speak", "--data-dir", str(standin_dir), "--voice", VOICE]
        + ["--backend", "onnxruntime", "--precision", precision, "--text", "はい。", "--output", "-"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and f"{precision} needs OpenVINO" in done.stderr and "Traceback" not in done.stderr


def test_a_second_voice_of_the_same_architecture_is_checked_not_timed_again(
    standin_dir: Path, tmp_path: Path, caplog
) -> None:
    cache = ModelCache(tmp_path / "cache")
    caplog.set_level(logging.INFO, logger="wyoming_hayakoe.runtime.children")
    first = prepared_and_measured(cache, standin_dir / SYNTH, RuntimeRequest()).runtime("decoder_step")
    other = standin_dir / "onnx" / "speakers" / "standin-b" / "synthesizer.onnx"  # other weights, same shapes
    second = prepared_and_measured(cache, other, RuntimeRequest()).runtime("decoder_step")
    assert "earlier voice of the same architecture" not in first.note
    assert "earlier voice of the same architecture" in second.note and second.seconds == first.seconds
    assert second.snr_db and second.snr_db.keys() == first.snr_db.keys()  # its own agreement check
    assert second.snr_db != first.snr_db  # computed on its own weights, not copied
    steps = [r.getMessage() for r in caplog.records if "step " in r.getMessage()]
    assert any("measuring decoder" in line for line in steps) and any("checking decoder" in line for line in steps)
    forced = prepared_and_measured(cache, other, RuntimeRequest(threads=1)).runtime("decoder_step")
    assert "earlier voice" not in forced.note  # one thread is another speed: timed anew


def test_entries_of_other_requests_stay_and_older_ones_go(standin_dir: Path, tmp_path: Path) -> None:
    source = standin_dir / SYNTH
    cache = ModelCache(tmp_path / "cache")
    forced = prepared_and_measured(cache, source, RuntimeRequest("onnxruntime")).parts["decoder"].parent
    older = tmp_path / "cache" / "made-by-an-older-version"  # its manifest records no request
    shutil.copytree(forced, older)
    manifest = json.loads((older / MANIFEST).read_text(encoding="utf-8"))
    del manifest["request"]
    (older / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    auto = prepared_and_measured(cache, source, RuntimeRequest()).parts["decoder"].parent
    assert auto != forced and forced.is_dir() and auto.is_dir()
    assert not older.exists()


def test_an_openvino_that_cannot_compile_the_decoder_leaves_it_on_onnxruntime(
    standin_dir: Path, tmp_path: Path, monkeypatch, caplog
) -> None:
    from wyoming_hayakoe.runtime import openvino

    def refuses(*args, **kwargs):
        raise RuntimeError("Exception from src/plugins/intel_cpu: unsupported node\nmore detail")

    monkeypatch.setattr(openvino, "open_compiled", refuses)
    monkeypatch.setattr(cache_module, "run_child", run_child_in_process)
    caplog.set_level(logging.INFO)
    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=tmp_path / "cache", backend="openvino")
    choice = engine.voice(VOICE).runtimes["decoder"]
    assert choice.backend == "onnxruntime"
    assert choice.failed["openvino f32"] == "could not run: Exception from src/plugins/intel_cpu: unsupported node"
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "decoder:" in r.getMessage()]
    assert len(warned) == 1 and "could not run" in warned[0].getMessage()


def test_without_openvino_the_server_says_so_once_and_runs_on_onnxruntime(
    standin_dir: Path, tmp_path: Path, monkeypatch, caplog
) -> None:
    import wyoming_hayakoe.runtime as runtime_package
    from wyoming_hayakoe.runtime import loading

    monkeypatch.setitem(sys.modules, "openvino", None)  # `import openvino` fails, as with too old a glibc
    monkeypatch.delitem(sys.modules, "wyoming_hayakoe.runtime.openvino")
    monkeypatch.delattr(runtime_package, "openvino")
    monkeypatch.setattr(loading, "_told_no_openvino", False)
    monkeypatch.setattr(cache_module, "run_child", run_child_in_process)
    caplog.set_level(logging.INFO)
    engine = load_measured([standin_dir], voices=["standin-a", "standin-b"], cache_dir=tmp_path / "cache")
    assert all(v.runtimes["decoder"].backend == "onnxruntime" for v in engine.voices.values())
    told = [r.getMessage() for r in caplog.records if "OpenVINO cannot be imported" in r.getMessage()]
    assert len([m for m in told if "every model runs on ONNX Runtime" in m]) == 1, told


@pytest.mark.parametrize("backend", ["auto", "openvino"])
def test_a_decoder_that_cannot_stream_stays_on_onnxruntime_and_nothing_is_measured(
    standin_dir: Path, tmp_path: Path, monkeypatch, backend: str
) -> None:
    """Its slices vary in length, and OpenVINO keeps buffers for every length it has run: only ONNX Runtime runs them."""
    from wyoming_hayakoe.runtime import stream

    def cannot(*args, **kwargs):
        raise stream.Unstreamable("a Resize on the time axis")

    monkeypatch.setattr(stream, "to_step_model", cannot)
    monkeypatch.setattr(cache_module, "run_child", run_child_in_process)
    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=tmp_path / "cache", backend=backend)
    assert engine.measuring is not None and not engine.measuring.pending
    choice = engine.voice(VOICE).runtimes["decoder"]
    assert choice.label == "onnxruntime f32" and "slices of varying length" in choice.note and not choice.seconds
    assert not list((tmp_path / "cache").glob("*/*.xml"))  # never converted for OpenVINO


def test_a_measured_voice_starts_knowing_its_decoding_speed_and_warms_up_only_to_its_first_audio(
    standin_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """The speed the cache measured paces the first request of a warm start (a Raspberry Pi slower than
    playback holds its first sentence back), so the start does not speak a warm-up text to learn it: it
    runs each model once, as far as the first audio, so the first request does not pay their first runs."""
    cache = tmp_path / "cache"
    measured = load_measured([standin_dir], voices=[VOICE], cache_dir=cache).voice(VOICE)
    choice = measured.runtimes["decoder"]
    decoder = measured.models.streaming_decoder
    assert decoder is not None and choice.seconds_per_frame()
    runs = decoder.plan(measure.DECODER_FRAMES)  # as the chosen runtime runs them, padding included
    assert choice.frames == round(sum(run.decoded for run in runs) / measured.config.hop_length)
    speed = choice.seconds[choice.label] / choice.frames * measured.sample_rate / measured.config.hop_length

    def count_runs(voice) -> list[int]:
        runs: list[int] = []
        timed = voice.speed.record
        monkeypatch.setattr(voice.speed, "record", lambda *args: runs.append(1) or timed(*args))
        return runs

    engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=cache)  # a warm start
    voice = engine.voice(VOICE)
    assert voice.speed.factor == pytest.approx(speed) and voice.speed.cold
    runs = count_runs(voice)
    warm_up(engine)
    assert len(runs) == 1 and not voice.speed.cold  # one decoder run, after the BERT and the front
    assert voice.speed.factor == pytest.approx(speed)  # a first run's time is not the machine's speed

    forced = Engine.load([standin_dir], voices=[VOICE], cache_dir=cache, backend="onnxruntime")  # timed by nothing
    other = forced.voice(VOICE)
    assert other.speed.factor is None and other.speed.cold
    runs = count_runs(other)
    warm_up(forced)
    assert len(runs) > 2 and other.speed.factor is not None  # its warm-up spoke the text and measured it


def _mapped_kib(folder: Path) -> tuple[int, int]:
    """KiB of this process's mappings of files under `folder`: mapped, and resident."""
    mapped = resident = 0
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].endswith(":"):  # a mapping's header: address range, ..., path
            inside = len(fields) >= 6 and fields[5].startswith(str(folder.resolve()) + "/")
        elif inside and fields[0] in ("Size:", "Rss:"):
            if fields[0] == "Size:":
                mapped += int(fields[1])
            else:
                resident += int(fields[1])
    return mapped, resident


def test_a_compiled_model_at_a_lower_precision_does_not_stay_in_memory_as_its_file(
    standin_dir: Path, tmp_path: Path
) -> None:
    """OpenVINO keeps the compiled model's file mapped after importing it, though at bf16 or f16 it computes
    from its own converted weights: the file's pages are given back, and the voice speaks the same."""
    precision = next(
        (
            p
            for p, c in (("bf16", "BF16"), ("f16", "FP16"))
            if c in core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        ),
        None,
    )
    if precision is None:
        pytest.skip("OpenVINO's CPU plugin computes no lower precision on this CPU")
    cache = tmp_path / "cache"
    spoken = []
    for _ in range(2):  # compiled, then imported from the entry's compiled file as at every later start
        engine = Engine.load([standin_dir], voices=[VOICE], cache_dir=cache, backend="openvino", precision=precision)
        spoken.append(
            np.concatenate(list(synthesize(engine, TEXT, VOICE, SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0))))
        )
    entry = engine.voice(VOICE).entry
    assert entry is not None
    mapped, resident = _mapped_kib(entry.openvino_cache)
    assert mapped > 0, "the compiled model is not imported from its file"
    assert resident <= mapped // 2, (mapped, resident)  # all of it, without the page-out; a fifth here (tiny)
    assert np.array_equal(spoken[0], spoken[1])


def test_openvino_keeps_the_buffers_of_the_voice_that_spoke_last_and_of_no_other(
    standin_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """Released after every request, a voice's buffers were faulted in again by the next one's first run
    (some 40 ms of its first audio, full-size): the voice that spoke last keeps them until another voice's
    model is about to run, which finds them released, so two voices' buffers are never held at once."""
    events: list[tuple[str, str]] = []  # (what, voice): a session's run or its buffers released
    run, release = OvSession.run, OvSession.release_memory

    def voice_of(session: OvSession) -> str:
        return owners[session._owner]

    def recorded_run(self: OvSession, *args, **kwargs):
        results = run(self, *args, **kwargs)
        events.append(("run", voice_of(self)))
        return results

    def recorded_release(self: OvSession) -> None:
        events.append(("release", voice_of(self)))
        release(self)

    engine = Engine.load(
        [standin_dir],
        voices=["standin-a", "standin-b"],
        cache_dir=tmp_path / "cache",
        backend="openvino",
        precision="f32",
    )
    owners: dict[Path, str] = {}
    for name in ("standin-a", "standin-b"):
        entry = engine.voice(name).entry
        assert entry is not None
        owners[entry.parts["decoder_step"].parent] = name
    monkeypatch.setattr(OvSession, "run", recorded_run)
    monkeypatch.setattr(OvSession, "release_memory", recorded_release)
    quiet = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)
    for voice in ("standin-a", "standin-a", "standin-b"):
        events.append(("request", voice))
        assert sum(len(piece) for piece in synthesize(engine, TEXT, voice, quiet)) > 0
    b_request = events.index(("request", "standin-b"))
    first_b_run = events.index(("run", "standin-b"))
    assert ("release", "standin-a") not in events[:b_request], events  # kept through and between a's requests
    assert ("release", "standin-b") not in events[first_b_run:], events
    # Before b's first run, a's two sessions (its first run's and its chunks') were released.
    assert events[b_request:first_b_run].count(("release", "standin-a")) == 2, events
