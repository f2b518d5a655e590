"""Fetch voices from the Hugging Face hub into a data dir that mirrors the repo."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .store import DEFAULT_REPO, download_patterns, missing_files

_LOGGER = logging.getLogger(__name__)


class DownloadFailed(RuntimeError):
    """The hub could not be reached or did not have the voice."""


def download_voices(
    voices: Sequence[str], data_dir: Path, repo: str = DEFAULT_REPO, revision: str | None = None
) -> None:
    """Download the BERT, tokenizer and `voices` into `data_dir` (hub layout).

    huggingface_hub writes each file to a temporary name and renames it when
    complete, resumes interrupted transfers and skips files already current,
    so a cut connection never leaves a half-written model behind.
    """
    from huggingface_hub import snapshot_download

    patterns = sorted({p for voice in voices for p in download_patterns(voice)})
    data_dir.mkdir(parents=True, exist_ok=True)
    _LOGGER.info("Downloading %s from %s into %s", ", ".join(voices), repo, data_dir)
    try:
        snapshot_download(repo_id=repo, revision=revision, local_dir=data_dir, allow_patterns=patterns)
    except _download_errors() as err:
        if not _hub_said_no(err) and missing_files([data_dir], voices) is None:
            _LOGGER.warning("Could not check %s for updates (%s); the installed files are complete", repo, err)
            return
        raise DownloadFailed(
            f"Could not download from the Hugging Face repo {repo}: {err}\n{missing_files([data_dir], voices)}"
        ) from err
    missing = missing_files([data_dir], voices)
    if missing is not None:
        raise DownloadFailed(f"The repo {repo} (revision {revision or 'main'}) did not provide everything.\n{missing}")


def _download_errors() -> tuple[type[BaseException], ...]:
    """What snapshot_download raises when the hub cannot be reached or a transfer fails.

    huggingface_hub lets its HTTP client's transport errors (a connection cut
    mid-file, a read timeout) through unwrapped; those are not OSErrors with
    httpx / httpx2 (huggingface_hub >= 1.0), unlike requests' (< 1.0).
    """
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    errors: list[type[BaseException]] = [LocalEntryNotFoundError, OfflineModeIsEnabled, HfHubHTTPError, OSError]
    for client in ("httpx2", "httpx"):
        module = sys.modules.get(client)  # only the one huggingface_hub imported
        if module is not None:
            errors.append(module.HTTPError)
    return tuple(errors)


def _hub_said_no(err: BaseException) -> bool:
    """The hub answered that the repo or revision does not exist (or is not ours to read)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    return isinstance(err, (RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError))
