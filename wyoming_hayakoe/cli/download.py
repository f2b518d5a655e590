"""wyoming-hayakoe-download: put voices from the hub into a data dir."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..download import DownloadFailed, download_voices
from ..store import DEFAULT_REPO, InvalidVoiceName, check_voice_name
from .common import fail, run_cli, setup_logging


def main() -> int:
    parser = argparse.ArgumentParser(prog="wyoming-hayakoe-download", description=__doc__)
    parser.add_argument(
        "--voice", action="append", required=True, help="Voice to download, e.g. jvnv-F1-jp (repeatable)"
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="Directory to download into (hub layout)")
    parser.add_argument("--repo", default=DEFAULT_REPO, help="Hugging Face repo id (default: %(default)s)")
    parser.add_argument("--revision", default=None, help="Branch, tag or commit of the repo (default: main)")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    setup_logging(args.debug)
    try:
        voices = [check_voice_name(v) for v in args.voice]
        download_voices(voices, args.data_dir, repo=args.repo, revision=args.revision)
    except (InvalidVoiceName, DownloadFailed) as err:
        fail(str(err))
    print(f"Downloaded {', '.join(voices)} into {args.data_dir}")
    return 0


def run() -> None:
    run_cli(main)


if __name__ == "__main__":
    run()
