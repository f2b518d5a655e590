"""The page's files ship in the wheel, and refer to nothing outside the page's own folder."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "wyoming_hayakoe" / "web" / "static"
PAGE_FILES = ("index.html", "app.js", "style.css")


def test_wheel_ships_the_page(tmp_path):
    # Build from a copy of the sources only, so the build leaves nothing in the checkout.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "wyoming_hayakoe", source / "wyoming_hayakoe", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("wyoming_hayakoe-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in PAGE_FILES if f"wyoming_hayakoe/web/static/{name}" not in names]
    assert not missing, missing


def test_page_uses_only_relative_urls():
    """Under Home Assistant's ingress the page lives at /api/hassio_ingress/<token>/: a URL
    starting with "/" would miss that prefix, and nothing may come from the internet."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    css = (STATIC / "style.css").read_text(encoding="utf-8")
    links = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert links, "no links found in index.html"
    assert [link for link in links if link.startswith(("/", "http:", "https:"))] == []
    requests = re.findall(r'(?:request|getJson|playInto)\(\s*"([^"]+)"', script)
    assert {"api/info", "api/speak", "api/reading", "api/dictionary", "api/dictionary/try"} <= set(requests)
    assert [url for url in requests if not url.startswith("api/")] == []
    assert "url(" not in css and "@import" not in css
