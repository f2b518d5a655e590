"""wyoming-hayakoe: Wyoming text-to-speech server for Japanese HayaKoe voices.

Run `wyoming-hayakoe --help` (or `python -m wyoming_hayakoe --help`) for
the options. Extra arguments can also be given in the environment variable
WYOMING_HAYAKOE_ARGS (split like a shell command line, appended to the real
ones).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..store import DEFAULT_REPO, check_voice_name
from .common import (
    add_cache_dir_argument,
    add_runtime_arguments,
    add_synthesis_arguments,
    cache_dir_from,
    positive_int,
    run_cli,
    runtime_from,
    settings_from,
    setup_logging,
)

if TYPE_CHECKING:
    from ..server.config import ServerConfig
    from ..web.app import WebFrontEnd

DEFAULT_URI = "tcp://127.0.0.1:10200"
ENV_ARGS = "WYOMING_HAYAKOE_ARGS"


class _StopRequested(BaseException):
    """SIGTERM or SIGINT before the server serves (it then handles signals itself); not an Exception,
    so no `except Exception` in the loading code mistakes it for a failure."""


def _stop_requested(signum: int, frame: object) -> None:
    raise _StopRequested(signal.Signals(signum).name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wyoming-hayakoe",
        description="Wyoming protocol text-to-speech server for Japanese (HayaKoe / Style-Bert-VITS2 JP-Extra voices).",
        epilog=f"Extra arguments may also be given in the environment variable {ENV_ARGS}.",
    )
    server = parser.add_argument_group("server")
    server.add_argument(
        "--uri", default=DEFAULT_URI, help="tcp://HOST:PORT, unix://PATH or stdio:// (default: %(default)s)"
    )
    server.add_argument(
        "--zeroconf",
        nargs="?",
        const="",
        default=None,
        metavar="NAME",
        help="Advertise the server over mDNS as _wyoming._tcp (tcp:// only); NAME defaults to hayakoe-<hostname>",
    )
    server.add_argument(
        "--zeroconf-host",
        default=None,
        metavar="IP",
        help="Address to advertise over mDNS (default: this host's LAN address when bound to 0.0.0.0)",
    )
    server.add_argument(
        "--http-uri",
        default=None,
        metavar="URI",
        help="Serve the web page (voices, readings, the user dictionary) on http://HOST:PORT, "
        "e.g. http://127.0.0.1:8099 (default: off)",
    )
    server.add_argument(
        "--http-allow",
        action="append",
        default=[],
        metavar="ADDR",
        help="Take web requests only from this address or network (repeatable; default: from everyone)",
    )
    server.add_argument(
        "--no-streaming",
        action="store_true",
        help="Do not advertise streaming text input (streaming requests are still accepted)",
    )
    server.add_argument(
        "--samples-per-chunk",
        type=positive_int,
        default=1024,
        metavar="N",
        help="Samples per audio-chunk event (default: %(default)s)",
    )
    server.add_argument(
        "--max-queue",
        type=positive_int,
        default=8,
        metavar="N",
        help="Synthesis requests in progress or waiting at once; more are refused with error 'busy' (default: %(default)s)",
    )
    server.add_argument(
        "--max-text-length",
        type=positive_int,
        default=10_000,
        metavar="CHARS",
        help="Longest text (characters) one request may send; longer ones get error 'text-too-long' (default: %(default)s)",
    )
    server.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        metavar="N",
        help="CPU threads for inference (default: ONNX Runtime's choice, all cores)",
    )
    add_runtime_arguments(server)

    voices = parser.add_argument_group("voices")
    voices.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        required=True,
        metavar="DIR",
        help="Directory with models in the Hugging Face hub layout (repeatable; first match wins)",
    )
    voices.add_argument(
        "--download-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="Where missing configured voices are downloaded (default: the first --data-dir)",
    )
    voices.add_argument(
        "--no-download", action="store_true", help="Never download; fail if a configured voice is missing"
    )
    voices.add_argument(
        "--download-repo",
        default=DEFAULT_REPO,
        metavar="REPO",
        help="Hugging Face repo to download from (default: %(default)s)",
    )
    voices.add_argument(
        "--download-revision", default=None, metavar="REV", help="Branch, tag or commit of that repo (default: main)"
    )
    voices.add_argument(
        "--voice",
        default=None,
        metavar="VOICE",
        help="Default voice, used when a request names none; downloaded if missing (default: jvnv-F1-jp if installed, else the first installed voice)",
    )
    voices.add_argument(
        "--load-voice",
        action="append",
        default=[],
        metavar="VOICE",
        help="Serve only these voices plus --voice (repeatable; downloaded if missing). Default: every installed voice",
    )
    voices.add_argument(
        "--no-warmup",
        action="store_true",
        help="Skip the warm-up at startup (each voice runs once as far as its first audio, so the first request is not slower)",
    )
    voices.add_argument(
        "--dictionary",
        type=Path,
        default=None,
        metavar="FILE",
        help="User dictionary: lines of 'surface, reading[, accent[, priority]]' (see docs/reading.md)",
    )
    add_cache_dir_argument(voices)

    add_synthesis_arguments(
        parser,
        title="synthesis defaults",
        style_help="Default style (emotion), e.g. Happy (default: Neutral, or a voice's first style if it has no Neutral)",
    )

    misc = parser.add_argument_group("logging")
    misc.add_argument("--debug", action="store_true", help="Log debug messages")
    misc.add_argument(
        "--log-format",
        default=logging.BASIC_FORMAT,
        metavar="FORMAT",
        help="Python logging format (default: %(default)s)",
    )
    misc.add_argument("--version", action="version", version=__version__, help="Print the version and exit")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = os.environ.get(ENV_ARGS, "").strip()
    if extra:
        argv += shlex.split(extra)
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.debug, args.log_format)
    if not args.debug:
        for noisy in ("zeroconf", "asyncio", "urllib3", "filelock", "huggingface_hub"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    log = logging.getLogger("wyoming_hayakoe")

    from ..server.config import ServerConfig, StartupError, ensure_voices, starting

    try:
        for name in [args.voice, *args.load_voice]:
            if name:
                check_voice_name(name)
        backend, precision = runtime_from(args)
        config = ServerConfig(
            uri=args.uri,
            data_dirs=args.data_dir,
            download_dir=args.download_dir,
            download=not args.no_download,
            download_repo=args.download_repo,
            download_revision=args.download_revision,
            voice=args.voice,
            load_voices=args.load_voice,
            style=args.style,
            settings=settings_from(args),
            samples_per_chunk=args.samples_per_chunk,
            streaming=not args.no_streaming,
            max_queue=args.max_queue,
            max_text_length=args.max_text_length,
            threads=args.threads,
            backend=backend,
            precision=precision,
            warm_up=not args.no_warmup,
            zeroconf=args.zeroconf,
            zeroconf_host=args.zeroconf_host,
            dictionary=args.dictionary,
            cache_dir=cache_dir_from(args),
        )
        from ..server.listener import Listener

        listener = Listener(config.uri)  # reject a bad --uri before loading models
        if config.zeroconf is not None and listener.scheme != "tcp":
            raise StartupError("--zeroconf needs a tcp:// --uri")
        if config.zeroconf_host:
            import ipaddress

            ipaddress.ip_address(config.zeroconf_host)
        listener.bind()  # a port in use is reported now, not after the models load
        log.info("%s", starting(config, __version__))
        front_ends = _web_front_ends(args, config, log)
    except (StartupError, ValueError) as err:  # InvalidSettings, InvalidVoiceName, bad URI, address or port
        log.error("%s", err)
        return 2
    # Downloading and optimizing models can take minutes: a stop meanwhile ends
    # them cleanly (an optimizer child is stopped too) and is not an error.
    # SIGINT too, also where it was ignored when the process started (a
    # background job's): serving handles it whatever it was, so does the start.
    signal.signal(signal.SIGTERM, _stop_requested)
    signal.signal(signal.SIGINT, _stop_requested)
    try:
        selection = ensure_voices(config)  # may download configured voices
        from ..server.app import run_server  # the engine: heavy imports only now

        run_server(config, listener, selection, front_ends)
    except StartupError as err:
        log.error("%s", err)
        return 2
    except _StopRequested:
        log.info("Stopped before the server was ready")
    finally:
        listener.close()  # the address, if serving never began
        for front_end in front_ends:
            front_end.close()
    return 0


def _web_front_ends(args: argparse.Namespace, config: ServerConfig, log: logging.Logger) -> list[WebFrontEnd]:
    """The web page's server, bound now, if `--http-uri` asks for one (ValueError, StartupError if not possible).

    With it, a `--dictionary` file that does not exist yet is no error when
    its folder does: the page creates it on the first save.
    """
    if args.http_uri is None:
        if args.http_allow:
            raise ValueError("--http-allow needs --http-uri")
        return []
    from ..web.app import WebFrontEnd

    web = WebFrontEnd(args.http_uri, args.http_allow, args.dictionary)
    if config.dictionary is not None and not config.dictionary.exists() and config.dictionary.parent.is_dir():
        log.info("User dictionary %s does not exist yet: the web page creates it when it saves", config.dictionary)
        config.dictionary = None
    web.bind()
    return [web]


def run() -> None:
    """Console entry point `wyoming-hayakoe`."""
    run_cli(main)


if __name__ == "__main__":
    run()
