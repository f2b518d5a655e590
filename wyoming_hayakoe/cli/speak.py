"""wyoming-hayakoe-speak: synthesize Japanese text to an audio file.

With --reading it prints the katakana reading of the text instead (no
models needed), to check how something will be pronounced.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .common import (
    add_cache_dir_argument,
    add_data_dir_argument,
    add_runtime_arguments,
    add_synthesis_arguments,
    cache_dir_from,
    fail,
    positive_int,
    run_cli,
    runtime_from,
    settings_from,
    setup_logging,
)

# File extension → (soundfile format, subtype): 16-bit PCM where the format has it.
OUTPUT_FORMATS = {
    ".wav": ("WAV", "PCM_16"),
    ".flac": ("FLAC", "PCM_16"),
    ".ogg": ("OGG", "VORBIS"),
    ".mp3": ("MP3", "MPEG_LAYER_III"),
}
STDOUT = "-"


@dataclass(frozen=True)
class Output:
    """Where the audio goes and in which format, checked before any synthesis."""

    path: Path | None  # None: standard output
    format: str
    subtype: str

    @classmethod
    def parse(cls, value: str) -> Output:
        """The output `--output` names; ValueError with a message for the user if it cannot be written."""
        if value == STDOUT:
            return cls(None, *OUTPUT_FORMATS[".wav"])
        path = Path(value)
        if path.is_dir() or value.endswith(os.sep):
            raise ValueError(f"--output {value}: is a folder; give a file name such as {path / 'speech.wav'}")
        kind = OUTPUT_FORMATS.get(path.suffix.lower())
        if kind is None:
            known = ", ".join(OUTPUT_FORMATS)
            suffix = repr(path.suffix) if path.suffix else "(no extension)"
            raise ValueError(
                f"--output {value}: unknown audio format {suffix}; use {known}, or - for WAV on standard output"
            )
        folder = path.parent
        if not folder.is_dir():
            raise ValueError(f"--output {value}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise ValueError(f"--output {value}: not writable")
        return cls(path, *kind)

    def write(self, audio: object, rate: int) -> str:
        """Write int16 mono `audio`; returns where it went, for the user."""
        import soundfile

        if self.path is None:
            buffer = io.BytesIO()  # WAV needs a seekable file for its header; a pipe is not
            soundfile.write(buffer, audio, rate, format=self.format, subtype=self.subtype)
            sys.stdout.buffer.write(buffer.getvalue())
            sys.stdout.buffer.flush()
            return "standard output"
        soundfile.write(self.path, audio, rate, format=self.format, subtype=self.subtype)
        return str(self.path)


def main() -> int:
    parser = argparse.ArgumentParser(prog="wyoming-hayakoe-speak", description=__doc__)
    add_data_dir_argument(parser, required=False)
    parser.add_argument("--voice", help="Voice name, e.g. jvnv-F1-jp (required unless --reading)")
    add_synthesis_arguments(parser)
    parser.add_argument("--text", help="Text to speak (default: read standard input)")
    parser.add_argument(
        "--output",
        metavar="FILE",
        help="Audio file to write, format by extension: .wav, .flac (16-bit), .ogg (Vorbis), .mp3; "
        "- writes WAV to standard output (required unless --reading)",
    )
    parser.add_argument(
        "--reading",
        action="store_true",
        help="Print the katakana reading of the text instead of synthesizing (needs no models)",
    )
    parser.add_argument(
        "--dictionary",
        type=Path,
        metavar="FILE",
        help="User dictionary: lines of 'surface, reading[, accent[, priority]]' (see docs/reading.md)",
    )
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="CPU threads for inference (default: all cores)"
    )
    add_cache_dir_argument(parser)
    add_runtime_arguments(parser)
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    setup_logging(args.debug)
    output: Output | None = None  # checked before anything slow runs
    if not args.reading:
        missing = [
            flag
            for flag, value in (("--data-dir", args.data_dir), ("--voice", args.voice), ("--output", args.output))
            if not value
        ]
        if missing:
            parser.error(f"the following arguments are required: {', '.join(missing)} (or give --reading)")
        try:
            output = Output.parse(args.output)
            runtime_from(args)
        except ValueError as err:
            fail(str(err))

    text = args.text if args.text is not None else sys.stdin.read()
    if not text.strip():
        fail("no text to speak (give --text or pipe text on standard input)")

    from ..text.user_dictionary import UserDictionaryError, apply_user_dictionary

    try:
        keep_words = apply_user_dictionary(args.dictionary)
    except UserDictionaryError as err:
        fail(str(err))

    if output is None:
        from ..text.rewrite import HomeAssistantReader, katakana_reading

        try:
            print(katakana_reading(text, HomeAssistantReader(keep_words)))
        except ValueError as err:
            fail(f"cannot read this text: {err}")
        return 0
    return _synthesize(args, text, keep_words, output)


class FileSink:
    """Collects the audio and writes it to the output at the end."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.pieces: list[np.ndarray] = []
        self.rate = 0
        self.where = ""

    async def start(self, rate: int) -> None:
        self.rate = rate

    async def add(self, audio: np.ndarray) -> None:
        self.pieces.append(audio)

    async def stop(self) -> None:
        audio = np.concatenate(self.pieces) if self.pieces else np.zeros(0, dtype=np.int16)
        self.where = self.output.write(audio, self.rate)

    @property
    def seconds(self) -> float:
        return sum(len(p) for p in self.pieces) / self.rate if self.rate else 0.0


def _synthesize(args: argparse.Namespace, text: str, keep_words: list[str], output: Output) -> int:
    from ..engine.engine import Engine, UnknownVoice
    from ..engine.settings import InvalidSettings
    from ..engine.speech import Speech, play
    from ..engine.voice_config import UnknownStyle, UnsupportedVoice
    from ..runtime.cache import PreparationError
    from ..store import InvalidVoiceName, MissingModelFiles

    sink = FileSink(output)
    try:
        settings = settings_from(args)
        engine = Engine.load(
            args.data_dir,
            voices=[args.voice],
            threads=args.threads,
            keep_words=keep_words,
            cache_dir=cache_dir_from(args),
            backend=args.backend,
            precision=args.precision,
        )
        if engine.measuring is not None:  # one text, then gone: measured first, as a server would by its second
            engine.measuring.run_now()
        speech = Speech(engine, args.voice, settings)
        asyncio.run(play(speech, speech.text(text), sink))
    except (
        MissingModelFiles,
        InvalidVoiceName,
        UnknownVoice,
        UnknownStyle,
        UnsupportedVoice,
        InvalidSettings,
        PreparationError,
    ) as err:
        fail(str(err))
    failure = speech.result.failure()
    if failure:
        fail(failure)
    try:
        asyncio.run(sink.stop())
    except (OSError, RuntimeError) as err:  # soundfile reports a failed write as a RuntimeError
        fail(f"could not write {args.output}: {err}")
    print(f"Wrote {sink.seconds:.2f} s to {sink.where}", file=sys.stderr)
    return 0


def run() -> None:
    run_cli(main)


if __name__ == "__main__":
    run()
