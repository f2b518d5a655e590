"""wyoming-hayakoe-speak: synthesize Japanese text to a WAV file.

With --reading it prints the katakana reading of the text instead (no
models needed), to check how something will be pronounced.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import (
    add_cache_dir_argument,
    add_data_dir_argument,
    add_synthesis_arguments,
    cache_dir_from,
    fail,
    positive_int,
    run_cli,
    settings_from,
    setup_logging,
)


def main() -> int:
    parser = argparse.ArgumentParser(prog="wyoming-hayakoe-speak", description=__doc__)
    add_data_dir_argument(parser, required=False)
    parser.add_argument("--voice", help="Voice name, e.g. jvnv-F1-jp (required unless --reading)")
    add_synthesis_arguments(parser)
    parser.add_argument("--text", help="Text to speak (default: read standard input)")
    parser.add_argument("--output", type=Path, help="WAV file to write (16-bit mono; required unless --reading)")
    parser.add_argument(
        "--reading", action="store_true",
        help="Print the katakana reading of the text instead of synthesizing (needs no models)",
    )
    parser.add_argument(
        "--dictionary", type=Path, metavar="FILE",
        help="User dictionary: lines of 'surface, reading[, accent[, priority]]' (see the README)",
    )
    parser.add_argument("--threads", type=positive_int, default=None, help="CPU threads for inference (default: all cores)")
    add_cache_dir_argument(parser)
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    setup_logging(args.debug)
    if not args.reading:
        missing = [flag for flag, value in (("--data-dir", args.data_dir), ("--voice", args.voice), ("--output", args.output)) if not value]
        if missing:
            parser.error(f"the following arguments are required: {', '.join(missing)} (or give --reading)")

    text = args.text if args.text is not None else sys.stdin.read()
    if not text.strip():
        fail("no text to speak (give --text or pipe text on standard input)")

    from ..text.user_dictionary import UserDictionaryError, apply_user_dictionary

    try:
        keep_words = apply_user_dictionary(args.dictionary)
    except UserDictionaryError as err:
        fail(str(err))

    if args.reading:
        from ..text.readings import HomeAssistantReader, katakana_reading

        try:
            print(katakana_reading(text, HomeAssistantReader(keep_words)))
        except ValueError as err:
            fail(f"cannot read this text: {err}")
        return 0
    return _synthesize(args, text, keep_words)


def _synthesize(args: argparse.Namespace, text: str, keep_words: list[str]) -> int:
    import numpy as np
    import soundfile

    from ..engine.engine import Engine, UnknownVoice
    from ..engine.prepared import PreparationError
    from ..engine.settings import InvalidSettings
    from ..engine.voice import UnknownStyle
    from ..store import InvalidVoiceName, MissingModelFiles

    try:
        settings = settings_from(args)
        engine = Engine(args.data_dir, voices=[args.voice], threads=args.threads, keep_words=keep_words, cache_dir=cache_dir_from(args))
        voice = engine.voice(args.voice)
        pieces = list(engine.synthesize(text, args.voice, settings))
    except (MissingModelFiles, InvalidVoiceName, UnknownVoice, UnknownStyle, InvalidSettings, PreparationError) as err:
        fail(str(err))
    except ValueError as err:
        fail(f"cannot read this text: {err}")
    audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int16)
    soundfile.write(args.output, audio, voice.sample_rate, subtype="PCM_16")
    print(f"Wrote {len(audio) / voice.sample_rate:.2f} s to {args.output}", file=sys.stderr)
    return 0


def run() -> None:
    run_cli(main)


if __name__ == "__main__":
    run()
