"""Writing task directories (docs/formats.md "Task format") from builders. Plain Python, no Django."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

# git on repositories we did not write: no hooks, no user or system config.
GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LANG": "C.UTF-8"}


# What the builders write into a task unless told otherwise (`--test-command`).
DEFAULT_TEST_COMMAND = "python -m pytest -q"
# owner/name at the end of a remote URL: https://host/owner/name(.git), git@host:owner/name.git
REMOTE_NAME = re.compile(r"[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


class BuildError(ValueError):
    pass


def repo_name(repo: Path, given: str = "") -> str:
    """The one name of a repository across builders: `owner/name` as SWE-bench writes it.

    Given (`--repo-name`) > the `origin` remote's URL > the directory's name. Decontamination
    matches tasks across sources by this name, so a clone and an import must agree.
    """
    if given:
        return given
    if not (repo / ".git").exists() and not (repo / "HEAD").exists():
        # Not a clone's top: git would find the remote of whatever repository encloses it.
        return repo.resolve().name
    try:
        url = git(repo, "config", "--get", "remote.origin.url").decode().strip()
    except BuildError:
        url = ""
    found = REMOTE_NAME.search(url) if "://" in url or "@" in url else None
    return f"{found.group(1)}/{found.group(2)}" if found else repo.resolve().name


def task_slug(name: str) -> str:
    """A repository name as it starts task ids: `owner__name`, as SWE-bench's instance ids do."""
    return name.replace("/", "__")


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-C", str(repo), *args],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", **GIT_ENV},
        capture_output=True,
        input=input,
        timeout=300,
    )
    if done.returncode != 0:
        raise BuildError(f"git {args[0]} in {repo} failed: {done.stderr.decode('utf-8', 'replace').strip()[:500]}")
    return done.stdout


def export_tree(repo: Path, commit: str, dest: Path) -> None:
    """The files of `commit`, without .git: the task carries no history to mine."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = git(repo, "archive", "--format=tar", commit)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def common_dir(paths: list[str]) -> str:
    """The deepest directory holding all paths ('.' when they share none)."""
    parents = [PurePosixPath(p).parent.parts for p in paths]
    shared: list[str] = []
    for level in zip(*parents, strict=False):
        if len(set(level)) != 1:
            break
        shared.append(level[0])
    return "/".join(shared) or "."


def write_task_dir(
    out: Path,
    task_id: str,
    statement: str,
    snapshot: Path,
    hidden: dict[str, bytes],
    tests_dest: str,
    expected_patch: str,
    metadata: dict[str, Any],
) -> Path:
    """Lay out one task directory; hidden test paths are relative to the repository root."""
    task_dir = out / task_id
    if task_dir.exists():
        shutil.rmtree(task_dir)
    task_dir.mkdir(parents=True)
    shutil.copytree(snapshot, task_dir / "repo_snapshot", symlinks=False)
    tests = task_dir / "tests"
    tests.mkdir()
    base = PurePosixPath(tests_dest) if tests_dest != "." else PurePosixPath()
    for rel, content in hidden.items():
        inner = PurePosixPath(rel).relative_to(base) if tests_dest != "." else PurePosixPath(rel)
        target = tests / inner
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    (task_dir / "task.md").write_text(statement.strip() + "\n")
    (task_dir / "expected_patch").write_text(expected_patch)
    (task_dir / "metadata.json").write_text(
        json.dumps({"task_id": task_id, "tests_dest": tests_dest, **metadata}, indent=2) + "\n"
    )
    return task_dir
