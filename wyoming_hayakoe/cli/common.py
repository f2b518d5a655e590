"""Pieces the console scripts share."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..engine.settings import SynthesisSettings
from ..runtime.request import BACKENDS, PRECISIONS, RuntimeRequest


def add_synthesis_arguments(
    parser: argparse.ArgumentParser,
    title: str = "synthesis",
    style_help: str = f"Style (emotion) of the voice (default: {SynthesisSettings.style})",
) -> None:
    """--style and the model knobs, with hayakoe's defaults; `settings_from` reads them back.

    --style defaults to None so that the server can tell "not given" (a voice
    without the default style then uses its first) from an explicit style.
    """
    defaults = SynthesisSettings()
    group = parser.add_argument_group(title)
    group.add_argument("--style", default=None, metavar="STYLE", help=style_help)
    group.add_argument(
        "--style-weight",
        type=float,
        default=defaults.style_weight,
        metavar="W",
        help="Strength of the style, 0-2 (default: %(default)s)",
    )
    group.add_argument(
        "--length-scale",
        type=float,
        default=defaults.length_scale,
        metavar="X",
        help="Speaking slowness: >1 slower, <1 faster (default: %(default)s)",
    )
    group.add_argument(
        "--noise-scale",
        type=float,
        default=defaults.noise_scale,
        metavar="X",
        help="Voice variation, 0-2 (default: %(default)s)",
    )
    group.add_argument(
        "--noise-w-scale",
        type=float,
        default=defaults.noise_w_scale,
        metavar="X",
        help="Rhythm variation, 0-2 (default: %(default)s)",
    )
    group.add_argument(
        "--sdp-ratio",
        type=float,
        default=defaults.sdp_ratio,
        metavar="X",
        help="Stochastic vs. deterministic duration mix, 0-1 (default: %(default)s)",
    )
    group.add_argument(
        "--volume",
        type=float,
        default=defaults.volume,
        metavar="X",
        help="Loudness, 0.1-2: 1 is hayakoe's level, 0.5 half as loud (-6 dB), 2 twice (+6 dB; peaks are "
        "limited, never clipped) (default: %(default)s)",
    )


def settings_from(args: argparse.Namespace) -> SynthesisSettings:
    """The settings `add_synthesis_arguments` parsed; raises InvalidSettings when one is out of range."""
    return SynthesisSettings(
        style=args.style or SynthesisSettings.style,
        style_weight=args.style_weight,
        length_scale=args.length_scale,
        noise_scale=args.noise_scale,
        noise_w_scale=args.noise_w_scale,
        sdp_ratio=args.sdp_ratio,
        volume=args.volume,
    )


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_data_dir_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        required=required,
        default=None,
        help="Directory with models in the hub layout (repeatable; first match wins)",
    )


DEFAULT_CACHE_DIR_TEXT = "$XDG_CACHE_HOME/wyoming-hayakoe, else ~/.cache/wyoming-hayakoe"


def default_cache_dir() -> Path:
    """Where models optimized for this machine are kept: the user's cache folder.

    Raises RuntimeError when there is neither XDG_CACHE_HOME nor a home folder
    (no HOME and a user id without a passwd entry, as in some containers).
    """
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wyoming-hayakoe"


def add_cache_dir_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--cache-dir, default None: resolve it with `cache_dir_from` after parsing.

    The default location is only looked up then, so that a missing home
    folder cannot stop the command line from parsing (or --help from printing).
    """
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="Writable folder for the models as optimized for this machine, made at the first start "
        f"and reused (default: {DEFAULT_CACHE_DIR_TEXT})",
    )


def cache_dir_from(args: argparse.Namespace) -> Path | None:
    """The --cache-dir given, else the default; None (a temporary folder) if there is no default."""
    if args.cache_dir is not None:
        return args.cache_dir
    try:
        return default_cache_dir()
    except RuntimeError as err:  # Path.home(): no HOME and no passwd entry
        logging.getLogger(__name__).warning(
            "No cache folder for optimized models (%s): using a temporary one; give --cache-dir to keep them", err
        )
        return None


def add_runtime_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--backend and --precision: where the voices' models run; `runtime_from` reads them back."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="Runtime for the voices' decoder: auto starts on ONNX Runtime, measures ONNX Runtime and OpenVINO "
        "on this machine in the background after a model is first prepared, and switches between requests to "
        "the faster one that gives the same audio (default: %(default)s)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="Decoder precision on OpenVINO: auto uses a lower one only where the CPU computes it natively "
        "(bf16 on x86 with AVX512_BF16 or AMX, f16 on ARM cores with FP16 arithmetic) and it measures at least "
        "38 dB SNR against f32 on this voice; f32 gives exact audio (default: %(default)s)",
    )


def runtime_from(args: argparse.Namespace) -> tuple[str, str]:
    """(backend, precision) as given; ValueError for a pair that cannot work (bf16 or f16 on ONNX Runtime)."""
    RuntimeRequest(args.backend, args.precision)
    return args.backend, args.precision


def setup_logging(debug: bool, fmt: str = logging.BASIC_FORMAT) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format=fmt, stream=sys.stderr)


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run_cli(main: Callable[[], int]) -> NoReturn:
    """Exit with main()'s code; a Ctrl-C ends quietly.

    faulthandler is on: should native code crash the process anyway, the
    log (standard error) still says which signal and where in Python.
    """
    faulthandler.enable()
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
