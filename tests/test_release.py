"""The release: the workflow, config.yaml's image and the release commit agree.

config.yaml names a prebuilt image only from the commit that releases it (made
by tools/release.py); the release workflow checks that commit, pushes that
image for config.yaml's architectures and publishes the package. Model-free
and offline.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools import release

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
FILES = ("config.yaml", "pyproject.toml", "wyoming_hayakoe/__init__.py", "Dockerfile", "addon/CHANGELOG.md")


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))


def run_lines(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_config_names_an_image_only_as_a_release_commit_does(config):
    """Without an image the Supervisor builds on the device; with one, it is the workflow's, at a released version."""
    if "image" not in config:
        return
    assert config["image"] == release.default_image(ROOT)
    assert release.check(ROOT, f"v{config['version']}", config["image"]) == config["version"]
    tags = subprocess.run(["git", "tag", "--list", f"v{config['version']}"], cwd=ROOT, capture_output=True, text=True)
    assert tags.stdout.strip() == f"v{config['version']}", (
        "config.yaml names an image of a version that has no release tag: only `tools/release.py prepare` adds one"
    )


def test_every_version_is_the_same():
    assert len(set(release.versions(ROOT).values())) == 1, release.versions(ROOT)


def test_the_workflow_runs_on_version_tags_only(workflow):
    # PyYAML reads the key `on` as True.
    trigger = workflow[True]
    assert set(trigger) == {"push"} and set(trigger["push"]) == {"tags"}
    (pattern,) = trigger["push"]["tags"]
    assert pattern == "v[0-9]+.[0-9]+.[0-9]+", "the tags tools/release.py makes, and nothing else"
    assert workflow["permissions"] == {}, "each job asks for what it needs"


def test_the_workflow_checks_the_release_commit_first(workflow):
    jobs = workflow["jobs"]
    (command,) = run_lines(jobs["check"])
    assert command.startswith("python3 tools/release.py check ")
    image = re.search(r'--image "([^"]+)"', command)
    assert image and image.group(1) == f"ghcr.io/${{OWNER,,}}/{release.IMAGE_REPOSITORY}"
    assert jobs["image"]["needs"] == "check" and jobs["dist"]["needs"] == "check"


def test_the_workflow_builds_the_image_with_the_script_for_every_architecture(workflow, config):
    job = workflow["jobs"]["image"]
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    (build,) = [line for line in run_lines(job) if "script/release-image" in line]
    assert build.startswith("sudo script/release-image ")
    assert set(re.findall(r"--arch (\S+)", build)) == set(config["arch"])
    assert "--push" in build and "--image" not in build, "the image is config.yaml's, as the check job found it"
    qemu = [step for step in job["steps"] if step.get("uses", "").startswith("docker/setup-qemu-action@")]
    assert qemu and qemu[0]["with"]["platforms"] == "arm64"
    assert (ROOT / "script" / "release-image").stat().st_mode & 0o111


def test_pypi_gets_the_built_package_by_trusted_publishing_after_the_image(workflow):
    jobs = workflow["jobs"]
    assert "script/build-dist" in run_lines(jobs["dist"])
    publish = jobs["pypi"]
    assert publish["permissions"] == {"id-token": "write"}, "trusted publishing, no token"
    assert set(publish["needs"]) == {"dist", "image"}
    assert publish["environment"]["name"] == "pypi"
    uses = [step["uses"] for step in publish["steps"]]
    assert uses[-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert not any("password" in step.get("with", {}) for step in publish["steps"])


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository with the files a release changes, as they are now, committed."""
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    config = tmp_path / "config.yaml"  # as on a branch before its release: built on the device
    config.write_text(release.IMAGE_LINE.sub("", config.read_text(encoding="utf-8")), encoding="utf-8")
    changelog = tmp_path / release.CHANGELOG
    if f"\n{release.UNRELEASED}\n" not in changelog.read_text(encoding="utf-8"):
        changelog.write_text(f"# Changelog\n\n{release.UNRELEASED}\n\n- A change.\n", encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "before"], cwd=tmp_path, check=True)
    return tmp_path


def release_command(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    command = [sys.executable, str(ROOT / "tools" / "release.py"), "--root", str(root), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def test_prepare_makes_one_release_commit_with_the_image_and_its_tag(checkout):
    assert "image" not in yaml.safe_load((checkout / "config.yaml").read_text(encoding="utf-8"))
    result = release_command(checkout, "prepare", "9.8.7")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load((checkout / "config.yaml").read_text(encoding="utf-8"))
    image = "ghcr.io/wyoming-hayakoe/wyoming-hayakoe"
    assert config["version"] == "9.8.7" and config["image"] == image
    assert set(release.versions(checkout).values()) == {"9.8.7"}
    assert "\n## 9.8.7\n" in (checkout / release.CHANGELOG).read_text(encoding="utf-8")
    log = subprocess.run(["git", "log", "--format=%s", "v9.8.7"], cwd=checkout, capture_output=True, text=True)
    assert log.stdout.splitlines()[0] == f"release 9.8.7: the add-on pulls {image}"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True)
    assert status.stdout == "", "everything the release changes is in its commit"
    # What the workflow then checks.
    assert release_command(checkout, "check", "v9.8.7", "--image", image).returncode == 0
    wrong_owner = release_command(checkout, "check", "v9.8.7", "--image", "ghcr.io/someone-else/wyoming-hayakoe")
    assert wrong_owner.returncode == 1 and "config.yaml's image" in wrong_owner.stderr
    assert release_command(checkout, "prepare", "9.8.7").returncode == 1, "no second release of a version"


def test_check_refuses_a_tag_the_files_do_not_say(checkout):
    image = "ghcr.io/wyoming-hayakoe/wyoming-hayakoe"
    version = release.versions(checkout)["config.yaml"]
    result = release_command(checkout, "check", f"v{version}", "--image", image)
    assert result.returncode == 1 and "config.yaml's image is None" in result.stderr, "no image: not a release"
    release.prepare(checkout, "1.2.3", image)
    (checkout / "pyproject.toml").write_text(
        (checkout / "pyproject.toml").read_text(encoding="utf-8").replace('"1.2.3"', '"1.2.4"'), encoding="utf-8"
    )
    result = release_command(checkout, "check", "v1.2.3", "--image", image)
    assert result.returncode == 1 and "pyproject.toml says 1.2.4" in result.stderr
    assert release_command(checkout, "check", "1.2.3", "--image", image).returncode == 1, "a tag starts with v"
