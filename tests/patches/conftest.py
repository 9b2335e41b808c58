from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

# Real git, reading no configuration of the machine it runs on.
GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "LANG": "C.UTF-8",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@localhost",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@localhost",
}


class GitRepo:
    """A scratch repository: write a base, commit it, change the tree, ask git for the diff."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.git("init", "-q")

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> str:
        done = subprocess.run(["git", *args], cwd=self.root, env=GIT_ENV, input=input, capture_output=True)
        if check and done.returncode != 0:
            raise AssertionError(done.stderr.decode())
        return done.stdout.decode("utf-8", "surrogateescape")

    def write(self, path: str, content: str | bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_bytes(content.encode())

    def commit(self) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", "base")

    def diff(self, *options: str) -> str:
        """The staged change against the last commit, as `git diff` prints it."""
        self.git("add", "-A")
        return self.git("diff", "--cached", "--no-color", *options, "HEAD")

    def export(self, dest: Path) -> Path:
        """The last commit's files, without .git, in `dest`."""
        dest.mkdir()
        archive = subprocess.run(
            ["git", "archive", "HEAD"], cwd=self.root, env=GIT_ENV, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return dest

    def apply_to_base(self, patch: str, dest: Path) -> Path:
        """The last commit's files exported to `dest` with `patch` applied by git apply (as Crucible applies)."""
        self.export(dest)
        done = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "-"],
            cwd=dest,
            env=GIT_ENV,
            input=patch.encode("utf-8", "surrogateescape"),
            capture_output=True,
        )
        if done.returncode != 0:
            raise AssertionError(done.stderr.decode())
        return dest


def snapshot(root: Path) -> dict[str, object]:
    """A tree's files by path: content, executable bit, and link targets for symlinks."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = (path.read_bytes(), os.access(path, os.X_OK))
    return out


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")
