"""The documentation as a reader follows it: every link leads somewhere, every page is reachable.

Model-free and fast. Links are checked as GitHub resolves them: a relative
path from the linking file's folder, an anchor against the target's headings
(GitHub's slugs: lower case, punctuation dropped, spaces to hyphens). The
add-on's guide links to the repository by absolute GitHub URLs, because Home
Assistant's Documentation tab shows it outside the repository; those are
checked against the files here too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = ROOT / "docs"
ADDON_DOCS = ROOT / "addon" / "DOCS.md"
REPO_URL = "https://github.com/wyoming-hayakoe/wyoming-hayakoe/blob/main/"
# What Home Assistant's Documentation tab can show in one sitting (issue: at most about 12 KB).
ADDON_DOCS_MAX_BYTES = 12 * 1024

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def pages() -> list[Path]:
    return [ROOT / "README.md", ADDON_DOCS, *sorted(DOCS_DIR.glob("*.md"))]


def prose(path: Path) -> str:
    """The file without its code blocks: a `# comment` in a fence is no heading, a `](x)` no link."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (the first of its name; later ones get -1, -2, ...)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(prose(path)):
        name, n = slug(heading), 0
        while (name if n == 0 else f"{name}-{n}") in found:
            n += 1
        found.add(name if n == 0 else f"{name}-{n}")
    return found


def links(path: Path) -> list[str]:
    return LINK_TARGET.findall(CODE_SPAN.sub("", prose(path)))


def resolve(source: Path, target: str) -> tuple[Path, str] | None:
    """The file and anchor a link leads to in this repository; None for a link elsewhere."""
    if target.startswith(REPO_URL):
        target = str(ROOT / target[len(REPO_URL) :])
    elif re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None
    file, _, anchor = target.partition("#")
    return (source if not file else (source.parent / file).resolve()), anchor


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_somewhere(page: Path):
    broken = []
    for target in links(page):
        resolved = resolve(page, target)
        if resolved is None:
            continue
        file, anchor = resolved
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, "\n".join(broken)


def test_the_readme_leads_to_every_page():
    readme = ROOT / "README.md"
    linked = {resolved[0] for target in links(readme) if (resolved := resolve(readme, target))}
    for page in [*DOCS_DIR.glob("*.md"), ADDON_DOCS]:
        assert page.resolve() in linked, f"README.md does not link to {page.relative_to(ROOT)}"


def test_addon_docs_japanese_first_with_every_option():
    text = ADDON_DOCS.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= ADDON_DOCS_MAX_BYTES, "addon/DOCS.md is too long for the Documentation tab"
    japanese, marker, english = text.partition("\n## English")
    assert marker and "\n## 日本語" in japanese, "addon/DOCS.md: the Japanese part comes first, then '## English'"
    schema = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))["schema"]
    for key in schema:
        assert f"`{key}`" in japanese, f"option {key} is not described in Japanese"
        assert f"### Option: `{key}`" in english, f"option {key} is not described in English"
