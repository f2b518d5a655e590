"""Make a release commit, and check one before anything is published.

    python tools/release.py prepare 0.2.0
    python tools/release.py check v0.2.0 --image ghcr.io/OWNER/wyoming-hayakoe

``prepare`` sets the version everywhere it is written (config.yaml,
pyproject.toml, the package's ``__version__``, the Dockerfile's
BUILD_VERSION), gives config.yaml the ``image:`` the release workflow pushes,
turns the changelog's "## Unreleased" into "## 0.2.0", commits that as
"release 0.2.0" and tags it v0.2.0. Pushing the tag runs
.github/workflows/release.yml, which builds and pushes that image for every
architecture in config.yaml and publishes the package to PyPI
(docs/releasing.md).

config.yaml names an image only from a release commit on: without one, the
Supervisor builds ./Dockerfile on the device, which is what a branch with
unreleased changes needs (an image would be the last release's code).

``check`` is the workflow's first step: the tag, every version and
config.yaml's image must agree, and the changelog must have the version's
section. Standard library only, so it runs on any machine with Python 3.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The image's name under its owner (ghcr.io/OWNER/wyoming-hayakoe), as the workflow pushes it.
IMAGE_REPOSITORY = "wyoming-hayakoe"
VERSION_RE = re.compile(r"\d+\.\d+\.\d+")

#: Where each file writes the version: (path, pattern with one group around the version).
VERSION_SITES = (
    ("config.yaml", re.compile(r'^version: "(.*)"$', re.M)),
    ("pyproject.toml", re.compile(r'^version = "(.*)"$', re.M)),
    ("wyoming_hayakoe/__init__.py", re.compile(r'^__version__ = "(.*)"$', re.M)),
    ("Dockerfile", re.compile(r'^ARG BUILD_VERSION="(.*)"$', re.M)),
)
IMAGE_LINE = re.compile(r"^image: (.*)$", re.M)
URL_LINE = re.compile(r"^url: https://github\.com/([^/\s]+)/[^/\s]+$", re.M)
CHANGELOG = "addon/CHANGELOG.md"
UNRELEASED = "## Unreleased"


class ReleaseError(Exception):
    """Something that must be put right before a release."""


def _version_in(root: Path, path: str, pattern: re.Pattern[str]) -> tuple[str, re.Match[str]]:
    """A file's text and where its version is in it."""
    text = (root / path).read_text(encoding="utf-8")
    match = pattern.search(text)
    if match is None:
        raise ReleaseError(f"{path}: no version where {pattern.pattern} expects it")
    return text, match


def versions(root: Path) -> dict[str, str]:
    """The version each file states."""
    return {path: _version_in(root, path, pattern)[1].group(1) for path, pattern in VERSION_SITES}


def config_image(root: Path) -> str | None:
    """config.yaml's image, or None when the Supervisor is to build on the device."""
    match = IMAGE_LINE.search((root / "config.yaml").read_text(encoding="utf-8"))
    return match.group(1).strip().strip("\"'") if match else None


def default_image(root: Path) -> str:
    """ghcr.io/OWNER/wyoming-hayakoe, OWNER from config.yaml's url (GitHub's owner, lower-cased as ghcr.io needs)."""
    match = URL_LINE.search((root / "config.yaml").read_text(encoding="utf-8"))
    if match is None:
        raise ReleaseError("config.yaml: no url: https://github.com/OWNER/REPO to name the image after")
    return f"ghcr.io/{match.group(1).lower()}/{IMAGE_REPOSITORY}"


def check(root: Path, tag: str, image: str) -> str:
    """The version the tag releases; ReleaseError if anything disagrees with it."""
    if not tag.startswith("v") or not VERSION_RE.fullmatch(tag[1:]):
        raise ReleaseError(f"tag {tag!r} is not vMAJOR.MINOR.PATCH")
    version = tag[1:]
    problems = [f"{path} says {found}" for path, found in versions(root).items() if found != version]
    named = config_image(root)
    if named != image:
        problems.append(f"config.yaml's image is {named!r}, not {image!r}")
    if f"\n## {version}\n" not in (root / CHANGELOG).read_text(encoding="utf-8"):
        problems.append(f"{CHANGELOG} has no '## {version}' section")
    if problems:
        raise ReleaseError(f"{tag}: " + "; ".join(problems))
    return version


def prepare(root: Path, version: str, image: str) -> None:
    """Write the release into the files (see the module's docstring); committing and tagging is the caller's."""
    if not VERSION_RE.fullmatch(version):
        raise ReleaseError(f"version {version!r} is not MAJOR.MINOR.PATCH")
    changelog = (root / CHANGELOG).read_text(encoding="utf-8")
    if f"\n{UNRELEASED}\n" not in changelog:
        raise ReleaseError(f"{CHANGELOG}: no '{UNRELEASED}' section to release")
    for path, pattern in VERSION_SITES:
        text, match = _version_in(root, path, pattern)
        (root / path).write_text(text[: match.start(1)] + version + text[match.end(1) :], encoding="utf-8")
    config = (root / "config.yaml").read_text(encoding="utf-8")
    if IMAGE_LINE.search(config):
        config = IMAGE_LINE.sub(f"image: {image}", config)
    else:
        config = URL_LINE.sub(lambda url: f"{url.group(0)}\nimage: {image}", config)
    (root / "config.yaml").write_text(config, encoding="utf-8")
    (root / CHANGELOG).write_text(changelog.replace(f"\n{UNRELEASED}\n", f"\n## {version}\n", 1), encoding="utf-8")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("prepare", help="make the release commit and its tag")
    make.add_argument("version", help="MAJOR.MINOR.PATCH")
    make.add_argument("--image", help="the image config.yaml names (default: ghcr.io/OWNER/wyoming-hayakoe)")
    verify = commands.add_parser("check", help="check a release tag before publishing it")
    verify.add_argument("tag", help="vMAJOR.MINOR.PATCH")
    verify.add_argument("--image", required=True, help="the image the workflow pushes")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root: Path = args.root
    try:
        if args.command == "check":
            print(check(root, args.tag, args.image))
            return 0
        versions(root)
        if git(root, "status", "--porcelain"):
            raise ReleaseError("the work tree has uncommitted changes")
        if git(root, "tag", "--list", f"v{args.version}"):
            raise ReleaseError(f"tag v{args.version} exists already")
        image = args.image or default_image(root)
        prepare(root, args.version, image)
        git(root, "commit", "--quiet", "--all", "--message", f"release {args.version}: the add-on pulls {image}")
        git(root, "tag", "--annotate", f"v{args.version}", "--message", f"wyoming-hayakoe {args.version}")
        check(root, f"v{args.version}", image)
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"Tagged v{args.version}. Publish it with: git push origin HEAD v{args.version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
