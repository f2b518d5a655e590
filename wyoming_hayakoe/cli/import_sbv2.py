"""wyoming-hayakoe-import: turn a Style-Bert-VITS2 JP-Extra model into a voice of a data dir.

Needs torch and safetensors: pip install 'wyoming-hayakoe[import]'.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import fail, run_cli, setup_logging

INSTALL_HINT = (
    "the importer needs torch and safetensors: pip install 'wyoming-hayakoe[import]' "
    "(CPU-only torch: add --extra-index-url https://download.pytorch.org/whl/cpu)"
)


def main() -> int:
    parser = argparse.ArgumentParser(prog="wyoming-hayakoe-import", description=__doc__)
    parser.add_argument(
        "model",
        type=Path,
        nargs="?",
        help="Model folder with *.safetensors, config.json and style_vectors.npy (Style-Bert-VITS2's model_assets/<name>)",
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="Data dir to write the voice into")
    parser.add_argument("--name", help="Voice name (default: the model folder's name)")
    parser.add_argument(
        "--checkpoint", type=Path, help="The .safetensors file to use (default: the only or newest one in the folder)"
    )
    parser.add_argument("--config", type=Path, help="config.json (default: the one in the folder)")
    parser.add_argument("--style-vectors", type=Path, help="style_vectors.npy (default: the one in the folder)")
    licence = parser.add_mutually_exclusive_group()
    licence.add_argument(
        "--license", metavar="TEXT", help="The model's licence and attribution, shown in Home Assistant and on the page"
    )
    licence.add_argument(
        "--license-file",
        type=Path,
        metavar="FILE",
        help="Read it from a file (default: a LICENSE or LICENCE file in the model folder, if there is one)",
    )
    parser.add_argument("--force", action="store_true", help="Replace a voice of that name")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    setup_logging(args.debug)
    if args.model is None and args.checkpoint is None:
        parser.error("give a model folder, or --checkpoint with --config and --style-vectors")
    try:
        from ..importer.sbv2 import ImportFailed, find_license, find_model_files, import_model
    except ImportError as err:
        fail(f"{INSTALL_HINT} ({err})")
    try:
        files = find_model_files(args.model, args.checkpoint, args.config, args.style_vectors)
        name = args.name or (args.model or files.checkpoint.parent).resolve().name
        print(f"Importing {files.checkpoint} ({files.choice}) as voice {name!r}")
        license_file = args.license_file or (find_license(args.model) if args.license is None else None)
        license = args.license or ""
        if license_file is not None:
            try:
                license = license_file.read_text(encoding="utf-8", errors="replace")
            except OSError as err:
                fail(f"--license-file {license_file}: {err.strerror or err}")
            print(f"Licence from {license_file}")
        elif not license:
            print("No licence given (--license): Home Assistant will say to see the model's own licence")
        target = import_model(files, args.data_dir, name, force=args.force, license=license)
    except ImportFailed as err:
        fail(str(err))
    print(f"Wrote {target}; start the server with --data-dir {args.data_dir} to use it")
    return 0


def run() -> None:
    run_cli(main)


if __name__ == "__main__":
    run()
