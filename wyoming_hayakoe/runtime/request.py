"""What the user asks of the runtimes (`--backend`, `--precision`, `--threads`) and what this machine offers.

The cache keys its entries by these (a change of CPU or runtime version makes
them again), and the measurement (measure.py) offers only the precisions the
CPU computes natively.
"""

from __future__ import annotations

import importlib.metadata
import platform
from dataclasses import dataclass
from pathlib import Path

ONNXRUNTIME = "onnxruntime"
OPENVINO = "openvino"
BACKENDS = ("auto", ONNXRUNTIME, OPENVINO)
PRECISIONS = ("auto", "f32", "bf16", "f16")
LOWER_PRECISIONS = ("bf16", "f16")  # OpenVINO only, where the CPU computes them natively (measure.py)
NO_OPENVINO = "OpenVINO cannot be imported"  # how a choice's note begins when OpenVINO is missing


@dataclass(frozen=True)
class RuntimeRequest:
    """Which runtimes may run a voice's decoder (`--backend`, `--precision`) and with how many threads.

    Only the decoder is measured and may run on OpenVINO (measure.py says
    why); a lower precision would change the front's durations anyway.
    Raises ValueError for an unknown value or bf16/f16 without OpenVINO.
    """

    backend: str = "auto"
    precision: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"Unknown backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"Unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if self.backend == ONNXRUNTIME and self.precision in LOWER_PRECISIONS:
            raise ValueError(
                f"{self.precision} needs OpenVINO: use --backend auto or openvino with --precision {self.precision}"
            )

    @property
    def measured_later(self) -> bool:
        """Whether the choice is measured after the start, in the background: only auto may start on ONNX Runtime."""
        return self.backend == "auto"


def request_arguments(request: RuntimeRequest) -> list[str]:
    """The children's command-line arguments for `request`."""
    threads = ["--threads", str(request.threads)] if request.threads else []
    return ["--backend", request.backend, "--precision", request.precision, *threads]


def cpu_signature() -> str:
    """The CPU features optimized kernels may depend on."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    features = next((line.split(":", 1)[1] for line in lines if line.lower().startswith(("flags", "features"))), "")
    return f"{platform.machine()} {' '.join(sorted(features.split()))}"


def native_lower_precision(cpuinfo: str | None = None) -> str | None:
    """The precision below f32 this CPU computes itself, per /proc/cpuinfo: bf16 on x86 with
    AVX512_BF16 or AMX, f16 on ARMv8.2+ cores with FP16 arithmetic (`asimdhp`: Cortex-A55/A76,
    a Pi 5, HA Green, RK3588). None elsewhere: emulated, it is slower than f32. A Cortex-A72
    (a Pi 4) stores f16 but does not compute it, and lists no `asimdhp`.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        features = set(value.split())
        if key.strip().lower() == "flags":  # x86
            return "bf16" if features & {"avx512_bf16", "amx_bf16"} else None
        if key.strip().lower() == "features":  # ARM
            return "f16" if "asimdhp" in features else None
    return None


def onnxruntime_version() -> str:
    """Imported only here: the command lines that share this module's names (the download CLI) never load it."""
    import onnxruntime

    return str(onnxruntime.__version__)


def openvino_version() -> str | None:
    """The installed OpenVINO's version, without importing it (None if it is not installed)."""
    try:
        return importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        return None
