"""What the command line decides, and the voices on disk: everything before the models load.

Nothing here imports the engine, so configuration mistakes are reported
in a fraction of a second.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.settings import SynthesisSettings
from ..store import DEFAULT_REPO, check_voice_name, installed_voices, missing_files
from .wording import counted

_LOGGER = logging.getLogger(__name__)

PREFERRED_DEFAULT_VOICE = "jvnv-F1-jp"


class StartupError(RuntimeError):
    """The server cannot start; the message says why and what to do."""


@dataclass
class ServerConfig:
    """Everything the command line decides."""

    uri: str
    data_dirs: list[Path]
    download_dir: Path | None = None
    download: bool = True
    download_repo: str = DEFAULT_REPO
    download_revision: str | None = None
    voice: str | None = None
    load_voices: list[str] = field(default_factory=list)
    style: str | None = None
    settings: SynthesisSettings = field(default_factory=SynthesisSettings)
    samples_per_chunk: int = 1024
    streaming: bool = True
    max_queue: int = 8
    max_text_length: int = 10_000
    threads: int | None = None
    backend: str = "auto"  # where the voices' models run (see runtime/measure.py)
    precision: str = "auto"  # the decoder's, on OpenVINO
    warm_up: bool = True
    zeroconf: str | None = None  # service name; None = off
    zeroconf_host: str | None = None
    dictionary: Path | None = None  # user dictionary file
    cache_dir: Path | None = None  # models optimized for this machine; None: a temporary folder


@dataclass(frozen=True)
class VoiceSelection:
    """Where the models are and which voices to serve."""

    data_dirs: list[Path]
    default_voice: str
    load: list[str] | None  # None: every installed voice


def ensure_voices(config: ServerConfig) -> VoiceSelection:
    """Data dirs to search, the default voice and the voices to load.

    Configured voices (`--voice`, `--load-voice`) that are not installed are
    downloaded into the download dir, unless downloads are off. Nothing else
    is ever downloaded.
    """
    data_dirs = list(config.data_dirs)
    if config.download_dir is not None and config.download_dir not in data_dirs:
        data_dirs.append(config.download_dir)
    configured = _configured(config)
    absent = missing_files(data_dirs, configured)
    missing = absent.incomplete if absent is not None else []
    if absent is not None and configured:
        if not config.download:
            raise StartupError(str(absent))
        target = config.download_dir or data_dirs[0]
        wanted = [v for v in missing if v] or configured[:1]  # the BERT comes with any voice
        _LOGGER.info(
            "Not installed: %s; downloading into %s", ", ".join(v or "the shared BERT" for v in missing), target
        )
        from ..download import DownloadFailed, download_voices

        try:
            download_voices(wanted, target, repo=config.download_repo, revision=config.download_revision)
        except DownloadFailed as err:
            raise StartupError(
                f"{err}\n(with no internet access, copy the files in by hand and use --no-download)"
            ) from err
    installed = installed_voices(data_dirs)
    if not installed:
        raise StartupError(
            "No voices installed in " + ", ".join(str(d) for d in data_dirs) + ".\n"
            f"Start with --voice {PREFERRED_DEFAULT_VOICE} to download one, or run:\n"
            f"  wyoming-hayakoe-download --voice {PREFERRED_DEFAULT_VOICE} --data-dir {data_dirs[0]}"
        )
    load, default = _chosen(config, configured, installed)
    return VoiceSelection(data_dirs, default, load)


def _configured(config: ServerConfig) -> list[str]:
    return list(dict.fromkeys(check_voice_name(v) for v in [config.voice, *config.load_voices] if v))


def _chosen(config: ServerConfig, configured: list[str], installed: list[str]) -> tuple[list[str] | None, str]:
    """The voices to load (None: every installed one) and the default voice."""
    load = configured if config.load_voices else None
    candidates = load or installed
    default = config.voice or (PREFERRED_DEFAULT_VOICE if PREFERRED_DEFAULT_VOICE in candidates else candidates[0])
    return load, default


def starting(config: ServerConfig, version: str) -> str:
    """The first line of the log: the version and the voices it is about to serve (before any download)."""
    data_dirs = list(config.data_dirs) + ([config.download_dir] if config.download_dir is not None else [])
    configured = _configured(config)
    installed = list(dict.fromkeys(installed_voices(data_dirs) + configured))
    if not installed:
        return f"wyoming-hayakoe {version} starting; no voices installed"
    load, default = _chosen(config, configured, installed)
    voices = load or installed
    return f"wyoming-hayakoe {version} starting with {counted(len(voices), 'voice')}: {', '.join(voices)} (default {default})"
