"""Side-by-side benchmark: our Wyoming server against the hayakoe library.

    python tools/benchmark.py [--rounds 3] [--out bench-results]

Builds the full-size stand-in models if missing (a few minutes, once), then,
with noise 0 and the same texts on both sides, alternates runs of

* our server over the Wyoming protocol (`synthesize` → first `audio-chunk`), and
* hayakoe 1.3.1 in its own process (`stream()` → first chunk),

and reports medians and ratios (ours / hayakoe) of time to first audio,
speed factor (audio seconds per compute second), when a listener who starts
playing at the first chunk has heard it all (playback waits whenever audio
has not arrived yet) and how long that listener waited mid-sentence and at
sentence boundaries (tools/listener.py says how it tells them apart), peak RSS (VmHWM) with one and two voices, and ready
time (process start → first request answerable).
Our server starts once with an empty model cache (its first start after an
install, when it optimizes the models in a child process: reported apart,
with the peak of the server and that child together, sampled from /proc;
its ready time is when it serves, and it is left running until it has
measured the runtimes in the background, so the later starts use the
stored choice) and then as it starts every later time (checked to have
used the cache and measured nothing while timed).
Each server's log goes to <out>/logs/.
It then runs the independent client wyoming-bench against our server, and
times the decoder's runtimes on a trained decoder beside random weights of
its architecture (tools/decoder_speed.py).
Results go to a JSON file and a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import decoder_speed  # noqa: E402
from tools.listener import Listening, listen  # noqa: E402
from wyoming_hayakoe.cli.benchmark import TEXTS  # noqa: E402  (the user benchmark's texts)
from wyoming_hayakoe.runtime.entry import StreamSpec  # noqa: E402

VOICES = ("standin-a", "standin-b")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status_kib(pid: int, field: str) -> int:
    """A `field:` line of /proc/<pid>/status in KiB; 0 if the process is gone (or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc/<pid>/task/*/children (else from every process's parent)."""
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tasks = list(task_dir.iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return []  # gone
    children: list[int] = []
    files = [task / "children" for task in tasks]
    if files and not any(f.exists() for f in files) and Path(f"/proc/{pid}").exists():
        return _children_by_ppid(pid)  # a kernel without CONFIG_PROC_CHILDREN
    for file in files:
        try:
            children += [int(word) for word in file.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass  # that thread ended
    return children


def _children_by_ppid(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:  # field 4, after "(comm) state"
                children.append(int(entry.name))
    return children


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants alive now."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        if current not in tree:
            tree.append(current)
            todo += _children(current)
    return tree


def tree_rss_kib(pid: int) -> int:
    """Sum of VmRSS (KiB) over `pid` and its descendants; processes that vanish meanwhile count 0."""
    return sum(_status_kib(member, "VmRSS") for member in process_tree(pid))


class TreeRssSampler:
    """Samples `tree_rss_kib(pid)` every `interval` s in a thread and keeps the maximum."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.peak_kib = max(self.peak_kib, tree_rss_kib(self.pid))
            self.samples += 1
            if self._stop.wait(self.interval):
                return

    def stop(self) -> int:
        """Stop sampling (after one last sample); the peak in KiB."""
        self._stop.set()
        self._thread.join()
        return self.peak_kib


def vm_hwm_kib(pid: int) -> int:
    return _status_kib(pid, "VmHWM")


def data_dir_with(full: Path, voices: tuple[str, ...], root: Path) -> Path:
    """A data dir of symlinks holding the shared BERT and only `voices`."""
    target = root / "+".join(voices)
    if target.exists():
        shutil.rmtree(target)
    (target / "onnx" / "speakers").mkdir(parents=True)
    (target / "bert").symlink_to(full / "bert")
    (target / "onnx" / "bert").symlink_to(full / "onnx" / "bert")
    for voice in voices:
        (target / "onnx" / "speakers" / voice).symlink_to(full / "onnx" / "speakers" / voice)
    return target


@dataclass
class Side:
    """Measurements of one system."""

    ready: list[float] = field(default_factory=list)
    first_audio: dict[str, list[float]] = field(default_factory=dict)
    speed: dict[str, list[float]] = field(default_factory=dict)
    heard_by: dict[str, list[float]] = field(default_factory=dict)
    waits_mid_sentence: dict[str, list[list[float]]] = field(default_factory=dict)  # per run, each wait in s
    waits_at_boundaries: dict[str, list[list[float]]] = field(default_factory=dict)
    rss_mib: dict[str, int] = field(default_factory=dict)
    ready_first_start: float = float("nan")  # ours: empty model cache
    first_start_rss_kib: dict[str, int] = field(default_factory=dict)  # ours: how the first-start peak was found

    def add(self, text: str, first: float, total: float, audio: float, heard: Listening) -> None:
        self.first_audio.setdefault(text, []).append(first)
        self.speed.setdefault(text, []).append(audio / total)
        self.heard_by.setdefault(text, []).append(heard.heard_by)
        self.waits_mid_sentence.setdefault(text, []).append(heard.waits_mid_sentence)
        self.waits_at_boundaries.setdefault(text, []).append(heard.waits_at_boundaries)


#: What our server logs (wyoming_hayakoe.runtime.cache, INFO) only when it optimizes a model.
OPTIMIZING_RE = re.compile(r"Optimizing .* once for this machine")
#: What it logs at every start of each voice's decoder (wyoming_hayakoe.engine.voice).
RUNTIME_RE = re.compile(r"Voice (\S+ decoder: .*)")
MEASURED_RE = re.compile(r"measured after the start|measuring failed")


class OurServer:
    """Our server as a user runs it, talked to with wyoming's client.

    Its log (stderr) goes to `log_path`, not to a pipe that could fill up and
    block it. With `sample_tree`, the summed RSS of the server and its
    children (the model optimizer) is sampled from start until `stop`.
    """

    def __init__(
        self,
        data_dir: Path,
        voice: str,
        threads: int | None,
        cache_dir: Path,
        log_path: Path,
        sample_tree: bool = False,
        runtime: tuple[str, str] = ("auto", "auto"),
    ) -> None:
        self.port = free_port()
        self.log_path = log_path
        cmd = [
            sys.executable,
            "-m",
            "wyoming_hayakoe",
            "--uri",
            f"tcp://127.0.0.1:{self.port}",
            "--data-dir",
            str(data_dir),
            "--voice",
            voice,
            "--noise-scale",
            "0",
            "--noise-w-scale",
            "0",
            "--cache-dir",
            str(cache_dir),
            "--backend",
            runtime[0],
            "--precision",
            runtime[1],
        ]
        if threads:
            cmd += ["--threads", str(threads)]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        self.sampler = TreeRssSampler(self.process.pid) if sample_tree else None
        try:
            asyncio.run(self._wait_ready())
        except BaseException:
            self._end(timeout=10)
            raise
        self.ready = time.monotonic() - started

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def runtimes(self) -> list[str]:
        """What the server logged of each voice's decoder: the runtime it runs on and the timings it was chosen by."""
        return sorted(set(RUNTIME_RE.findall(self.log())))

    def wait_measured(self, voices: int, timeout: float = 3600) -> bool:
        """Wait until the runtimes of `voices` voices are measured (in the background, after the server began
        serving), so the warm starts use the stored choice and never measure while they are timed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            if len(MEASURED_RE.findall(self.log())) >= voices:
                return True
            time.sleep(0.5)
        return False

    def measured_while_timed(self) -> bool:
        """Whether this server measured runtimes itself (it then ran on ONNX Runtime f32 meanwhile)."""
        return MEASURED_RE.search(self.log()) is not None

    def optimized(self) -> bool:
        """Whether the server optimized a model (rather than taking all from the cache)."""
        return OPTIMIZING_RE.search(self.log()) is not None

    async def _wait_ready(self) -> None:
        from wyoming.client import AsyncTcpClient
        from wyoming.info import Describe, Info

        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server exited ({self.process.returncode}); end of {self.log_path}:\n{self.log()[-2000:]}"
                )
            try:
                async with AsyncTcpClient("127.0.0.1", self.port) as client:
                    await client.write_event(Describe().event())
                    event = await asyncio.wait_for(client.read_event(), 10)
                    if event is not None and Info.is_type(event.type):
                        return
            except OSError:
                pass
            await asyncio.sleep(0.05)
        raise TimeoutError(f"server did not answer Describe; end of {self.log_path}:\n{self.log()[-2000:]}")

    def synthesize(self, text: str, voice: str) -> tuple[float, float, float, Listening]:
        """Seconds to the first audio, to the end; seconds of audio; what a listener heard."""
        chunks, rate, total = self.answer(text, voice)
        audio = sum(len(samples) for _, samples in chunks) / rate
        return chunks[0][0], total, audio, listen(chunks, rate)

    def answer(self, text: str, voice: str, on_audio: Callable[[int], None] | None = None) -> tuple[list, int, float]:
        """The answer's chunks ((seconds since the request, int16 samples)), their rate and the seconds to its
        end; `on_audio` gets the samples received so far after each chunk."""
        return asyncio.run(self._answer(text, voice, on_audio))

    async def _answer(self, text: str, voice: str, on_audio: Callable[[int], None] | None) -> tuple[list, int, float]:
        import numpy as np
        from wyoming.audio import AudioChunk, AudioStop
        from wyoming.client import AsyncTcpClient
        from wyoming.error import Error
        from wyoming.tts import Synthesize, SynthesizeVoice

        async with AsyncTcpClient("127.0.0.1", self.port) as client:
            start = time.monotonic()
            await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
            chunks: list[tuple[float, np.ndarray]] = []
            received, rate = 0, 0
            while True:
                event = await client.read_event()
                if event is None or Error.is_type(event.type):
                    raise RuntimeError(f"synthesis failed: {event}")
                if AudioChunk.is_type(event.type):
                    chunk = AudioChunk.from_event(event)
                    chunks.append((time.monotonic() - start, np.frombuffer(chunk.audio, dtype="<i2")))
                    rate, received = chunk.rate, received + len(chunks[-1][1])
                    if on_audio is not None:
                        on_audio(received)
                elif AudioStop.is_type(event.type):
                    return chunks, rate, time.monotonic() - start

    def stop(self) -> tuple[int, dict[str, int]]:
        """Peak RSS (KiB) of the server itself (VmHWM); with `sample_tree`, the tree's too (else {}).

        The tree's peak is the highest sampled sum of VmRSS over the server and
        its descendants, but at least the server's VmHWM and the largest
        single-process peak (ru_maxrss): samples 50 ms apart can miss a spike.
        """
        rss = vm_hwm_kib(self.process.pid)
        tree: dict[str, int] = {}
        if self.sampler is not None:
            sampled = self.sampler.stop()
            tree = {"sampled_tree_peak": sampled, "samples": self.sampler.samples, "server_vm_hwm": rss}
        usage = self._end(timeout=60)
        if tree:
            tree["max_single_process"] = usage.ru_maxrss if usage else 0  # the server or a child it waited for
            tree["peak"] = max(tree["sampled_tree_peak"], rss, tree["max_single_process"])
        return rss, tree

    def _end(self, timeout: float) -> os.struct_rusage | None:
        """SIGTERM, wait up to `timeout` s, then SIGKILL; the rusage of the server and its waited-for children.

        os.kill and os.wait4 rather than Popen's terminate and wait, which
        would reap the process without its rusage. None if it was reaped already.
        """
        if self.sampler is not None:
            self.sampler.stop()
        if self.process.returncode is not None:
            return None
        os.kill(self.process.pid, signal.SIGTERM)  # unreaped, so the pid is still ours
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                print(
                    f"WARNING: server {self.process.pid} did not exit within {timeout:.0f} s of SIGTERM; killing it",
                    file=sys.stderr,
                    flush=True,
                )
                os.kill(self.process.pid, signal.SIGKILL)
                _, status, usage = os.wait4(self.process.pid, 0)
                break
            time.sleep(0.05)
        self.process.returncode = os.waitstatus_to_exitcode(status)
        return usage


class HayakoeWorker:
    """hayakoe in its own process (tools/bench_hayakoe.py)."""

    def __init__(self, data_dir: Path, voices: tuple[str, ...]) -> None:
        started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / "bench_hayakoe.py"), str(data_dir), *voices],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        hello = json.loads(self.process.stdout.readline())
        self.ready = time.monotonic() - started
        self.rss = hello["vm_hwm_kib"]

    def synthesize(self, text: str, voice: str) -> tuple[float, float, float, Listening]:
        self.process.stdin.write(json.dumps({"text": text, "voice": voice}, ensure_ascii=False) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        self.rss = answer["vm_hwm_kib"]
        return answer["first_audio"], answer["total"], answer["audio"], Listening(**answer["listening"])

    def stop(self) -> int:
        self.process.stdin.close()
        self.process.wait(60)
        return self.rss


def ensure_full_standin(path: Path) -> Path:
    if not (path / "standin.json").is_file():
        from tools.standin_models import build

        print(f"Building the full-size stand-in models in {path} (once; several minutes)...", flush=True)
        build(path, size="full", speakers=VOICES, seed=0)
    return path


def run_wyoming_bench(port: int, voice: str, rounds: int) -> dict:
    exe = shutil.which("wyoming-bench") or str(Path(sys.executable).parent / "wyoming-bench")
    if not Path(exe).exists():
        return {"skipped": "wyoming-bench is not installed (pip install wyoming-bench==2026.10.0)"}
    cmd = [
        exe,
        "tts",
        f"127.0.0.1:{port}",
        "--mode",
        "both",
        "--no-unique",
        "--rounds",
        str(rounds),
        "--warmup",
        "1",
        "--timeout",
        "120",
        "--config",
        json.dumps({"voice": {"name": voice}}),
        "--texts",
        *TEXTS.values(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    return {"exit_code": done.returncode, "output": done.stdout[-6000:] + done.stderr[-2000:]}


def streaming_decoding(full: Path) -> tuple[float, float, list[str], dict[str, dict[str, float]]]:
    """Our streaming decoder on the full-size decoder: the worst SNR (dB) over the long text's sentences
    against decoding each whole, over the sentence and over its last two frames (where the stream is
    flushed); and how many frames its runs decode per frame of each text's audio (`decoding_waste`).

    On the full-size decoder, whose receptive field the tiny test model does
    not have, both on ONNX Runtime f32 (the rewrite's exactness, not a
    precision); its own temporary model cache, so the timed first start stays cold.
    """
    import numpy as np

    from wyoming_hayakoe.engine.engine import Engine
    from wyoming_hayakoe.engine.settings import SynthesisSettings
    from wyoming_hayakoe.engine.voice import Voice
    from wyoming_hayakoe.runtime.cache import ModelCache
    from wyoming_hayakoe.runtime.loading import load_voice
    from wyoming_hayakoe.runtime.ort import OrtStreamingDecoder
    from wyoming_hayakoe.runtime.request import RuntimeRequest
    from wyoming_hayakoe.store import find_voice
    from wyoming_hayakoe.text import split_sentences

    engine = Engine.load([full], voices=[VOICES[0]], backend="onnxruntime")
    voice = engine.voice(VOICES[0])
    streaming = voice.models.streaming_decoder
    if not isinstance(streaming, OrtStreamingDecoder):
        raise SystemExit("the full-size decoder does not stream (see the log): nothing to compare")
    models = load_voice(find_voice([full], VOICES[0]), ModelCache(), RuntimeRequest(), chunked=False).models
    whole = Voice(voice.name, voice.config, voice.style_vectors, voice.frontend, models)
    quiet = SynthesisSettings(noise_scale=0.0, noise_w_scale=0.0)
    tail = 2 * voice.config.hop_length

    def snr(reference: np.ndarray, test: np.ndarray) -> float:
        noise = max(float(np.sum((reference - test) ** 2)), 1e-30)
        return float(10 * np.log10(float(np.sum(reference**2)) / noise))

    worst = worst_tail = float("inf")
    frames: dict[str, list[int]] = {}
    for name, text in TEXTS.items():
        for sentence in split_sentences(text):
            phonemes = voice.frontend.phonemize(sentence)
            bert = engine.bert.features(phonemes)
            frames.setdefault(name, []).append(voice.front(phonemes, bert, quiet)[0].shape[2])
            if name != "long":
                continue
            streamed = np.concatenate(list(voice.render(phonemes, bert, quiet))).astype(np.float64)
            reference = np.concatenate(list(whole.render(phonemes, bert, quiet))).astype(np.float64)
            worst = min(worst, snr(reference, streamed))
            worst_tail = min(worst_tail, snr(reference[-tail:], streamed[-tail:]))
    lines, waste = decoding_waste(streaming.spec, frames)
    return worst, worst_tail, lines, waste


def decoding_waste(spec: StreamSpec, frames: dict[str, list[int]]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Frames decoded per frame of audio, per text (its sentences of `frames`), as each plan runs them
    (StreamRun.decoded: a chunk per run, a sentence's first run less the delay it skips): the step model
    alone, as before its first run had a graph of its own (a delay's worth and the last chunk's padding
    more); ONNX Runtime's plan; OpenVINO's (the first run a chunk). hayakoe decodes each sentence whole: 1.00."""
    plans = {
        "step model alone": lambda n: (
            -(-(n * spec.hop + spec.delay) // (spec.chunk_frames * spec.hop)) * spec.chunk_frames
        ),
        "onnxruntime": lambda n: sum(run.decoded for run in spec.plan(n)) / spec.hop,
        "openvino": lambda n: sum(run.decoded for run in spec.plan(n, spec.chunk_frames)) / spec.hop,
    }
    waste = {
        plan: {name: sum(decoded(n) for n in sentences) / sum(sentences) for name, sentences in frames.items()}
        for plan, decoded in plans.items()
    }
    lines = [
        "| decoded frames per frame of audio | "
        + " | ".join(f"{n} ({sum(f)} frames)" for n, f in frames.items())
        + " |"
    ]
    lines.append("|---" * (len(frames) + 1) + "|")
    lines += [
        f"| {plan} | " + " | ".join(f"{ratio:.3f}" for ratio in row.values()) + " |" for plan, row in waste.items()
    ]
    return lines, waste


#: The row key of the first start with an empty model cache (ours: server + optimizer child together).
FIRST_START = "2 voices, first start, server + optimizer"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(ours: float, theirs: float) -> float:
    """ours / theirs; NaN where theirs is 0 (no waits at all, say)."""
    return ours / theirs if theirs else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="Runs per text and system (default: %(default)s)")
    parser.add_argument("--models", type=Path, default=ROOT / ".cache" / "standin" / "full-seed0")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--threads", type=int, default=None, help="--threads for our server (default: its own)")
    parser.add_argument("--skip-wyoming-bench", action="store_true")
    parser.add_argument("--backend", default="auto", help="--backend for our server (default: %(default)s)")
    parser.add_argument("--precision", default="auto", help="--precision for our server (default: %(default)s)")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"

    full = ensure_full_standin(args.models)
    snr, tail_snr, waste_lines, waste = streaming_decoding(full)
    print(
        f"streaming decoder vs whole, full-size decoder: {snr:.1f} dB SNR, last two frames {tail_snr:.1f} dB "
        "(worst sentence)",
        *waste_lines,
        sep="\n",
        flush=True,
    )
    dirs = {n: data_dir_with(full, VOICES[:n], args.out / "data") for n in (1, 2)}
    load_before = os.getloadavg()
    ours, theirs = Side(), Side()
    voice = VOICES[0]

    cache = args.out / "model-cache"
    shutil.rmtree(cache, ignore_errors=True)
    logs = args.out / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    warnings: list[str] = []
    # Empty cache: optimizes both voices in a child process; the tree's RSS is sampled meanwhile.
    runtime = (args.backend, args.precision)
    first_start = OurServer(
        dirs[2], voice, args.threads, cache, logs / "first-start.log", sample_tree=True, runtime=runtime
    )
    ours.ready_first_start = first_start.ready
    if runtime[0] == "auto" and not first_start.wait_measured(len(VOICES)):
        warnings.append(f"the first start did not finish measuring the runtimes: see {first_start.log_path}")
    ours.first_start_rss_kib = first_start.stop()[1]
    ours.rss_mib[FIRST_START] = ours.first_start_rss_kib["peak"] // 1024
    if not first_start.optimized():
        warnings.append(f"the first start did not optimize any model (cache not empty?): see {first_start.log_path}")

    server = OurServer(dirs[1], voice, args.threads, cache, logs / "warm-1-voice.log", runtime=runtime)
    chosen = server.runtimes()
    if server.measured_while_timed():
        warnings.append(f"a warm start measured runtimes while it was timed: see {server.log_path}")
    warm = [server]
    worker = HayakoeWorker(dirs[1], VOICES[:1])
    ours.ready.append(server.ready)
    theirs.ready.append(worker.ready)
    for round_ in range(args.rounds + 1):  # round 0 warms caches on both sides and is not counted
        for name, text in TEXTS.items():
            a = server.synthesize(text, voice)
            b = worker.synthesize(text, voice)
            if round_:
                ours.add(name, *a)
                theirs.add(name, *b)
                print(
                    f"round {round_} {name:8s} ours first {a[0]:.3f}s speed {a[2] / a[1]:.2f}x "
                    f"heard {a[3].heard_by:.2f}s mid-sentence waits {len(a[3].waits_mid_sentence)} | "
                    f"hayakoe first {b[0]:.3f}s speed {b[2] / b[1]:.2f}x "
                    f"heard {b[3].heard_by:.2f}s mid-sentence waits {len(b[3].waits_mid_sentence)}",
                    flush=True,
                )
    bench = {} if args.skip_wyoming_bench else run_wyoming_bench(server.port, voice, args.rounds)
    ours.rss_mib["1 voice"] = server.stop()[0] // 1024
    theirs.rss_mib["1 voice"] = worker.stop() // 1024

    server = OurServer(dirs[2], voice, args.threads, cache, logs / "warm-2-voices.log", runtime=runtime)
    warm.append(server)
    worker = HayakoeWorker(dirs[2], VOICES)
    ours.ready.append(server.ready)
    theirs.ready.append(worker.ready)
    for other in VOICES:
        server.synthesize(TEXTS["short"], other)
        worker.synthesize(TEXTS["short"], other)
    ours.rss_mib["2 voices"] = server.stop()[0] // 1024
    theirs.rss_mib["2 voices"] = worker.stop() // 1024
    theirs.rss_mib[FIRST_START] = theirs.rss_mib["2 voices"]  # hayakoe has no optimizing first start
    load_after = os.getloadavg()
    for started in warm:
        if started.optimized():
            warnings.append(f"a warm start optimized a model instead of using the cache: see {started.log_path}")

    rows = []
    for name in TEXTS:
        for metric, a, b in (
            ("first audio s", ours.first_audio, theirs.first_audio),
            ("speed factor", ours.speed, theirs.speed),
            ("heard by s", ours.heard_by, theirs.heard_by),
        ):
            rows.append((f"{metric} ({name})", median(a[name]), median(b[name])))
        for metric, waits in (
            ("waits mid-sentence", lambda side: side.waits_mid_sentence),
            ("waits at boundaries", lambda side: side.waits_at_boundaries),
        ):
            runs = [waits(side)[name] for side in (ours, theirs)]
            rows.append((f"{metric} n ({name})", *(median([len(run) for run in r]) for r in runs)))
            rows.append((f"{metric} s ({name})", *(median([sum(run) for run in r]) for r in runs)))
    for key in ("1 voice", "2 voices", FIRST_START):
        rows.append((f"peak RSS MiB ({key})", ours.rss_mib[key], theirs.rss_mib[key]))
    rows.append(("ready s (1 voice)", ours.ready[0], theirs.ready[0]))
    rows.append(("ready s (2 voices)", ours.ready[1], theirs.ready[1]))
    rows.append(("ready s (2 voices, first start)", ours.ready_first_start, theirs.ready[1]))

    width = max(len(r[0]) for r in rows)
    lines = [f"{'metric':{width}s}  {'ours':>9s}  {'hayakoe':>9s}  {'ratio':>6s}"]
    lines += [f"{m:{width}s}  {a:9.3f}  {b:9.3f}  {ratio(a, b):6.2f}" for m, a, b in rows]
    lines.append(f"ours: --backend {args.backend} --precision {args.precision}; hayakoe: onnxruntime f32")
    lines += [f"  {line}" for line in chosen]
    lines.append(
        f"streaming decoder vs whole (full-size decoder): {snr:.1f} dB SNR, last two frames {tail_snr:.1f} dB, "
        "worst sentence"
    )
    lines += waste_lines
    lines.append(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {os.cpu_count()} CPUs")
    trained = decoder_speed.table(args.threads, args.rounds)  # the same runtimes on trained weights
    lines += ["", *trained]
    lines += [f"WARNING: {warning}" for warning in warnings]
    table = "\n".join(lines)
    print(table)

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result = {
        "rows": [{"metric": m, "ours": a, "hayakoe": b, "ratio": ratio(a, b)} for m, a, b in rows],
        "raw": {"ours": ours.__dict__, "hayakoe": theirs.__dict__},
        "load_average": {"before": load_before, "after": load_after},
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "runtime": {"backend": args.backend, "precision": args.precision, "chosen": chosen},
        "streaming_decoding_snr_db": {"whole": snr, "last_two_frames": tail_snr},
        "decoded_frames_per_audio_frame": waste,
        "trained_decoder_speed": trained,
        "wyoming_bench": bench,
        "warnings": warnings,
    }
    (args.out / f"benchmark-{stamp}.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    (args.out / f"benchmark-{stamp}.txt").write_text(table + "\n\nwyoming-bench:\n" + bench.get("output", str(bench)))
    print(f"Results: {args.out}/benchmark-{stamp}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
