"""Build the demo libraries' git histories, reproducibly.

Usage: python demo/history/build_history.py OUT_DIR

Creates OUT_DIR/configkit, OUT_DIR/textstats and OUT_DIR/invledger as git
repositories (replacing them if present) plus OUT_DIR/<repo>.issues.json.
Each history starts with ``<repo>/base/`` committed with the message in
``<repo>/base-message.txt`` and then applies ``<repo>/commits/NN-slug.patch``
in order: a patch file is the commit message, a line holding only ``---``,
and a ``git diff``. Names, e-mails and dates are fixed, so every run gives
the same commit hashes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
# repository -> (author and committer name, e-mail)
REPOS: dict[str, tuple[str, str]] = {
    "configkit": ("Mira Okafor", "mira.okafor@example.com"),
    "textstats": ("Jonas Berg", "jonas.berg@example.org"),
    "invledger": ("Priya Raman", "priya.raman@example.net"),
}
START = datetime(2025, 1, 1, tzinfo=UTC)  # the initial commit; each later one is an hour after the previous
SEPARATOR = b"\n---\n"
SKIPPED_NAMES = {"__pycache__", ".pytest_cache", ".benchmarks"}
GIT_OPTIONS = [
    "-c", "init.defaultBranch=main",
    "-c", "commit.gpgsign=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.autocrlf=false",
]  # fmt: skip


@dataclass(frozen=True)
class Change:
    name: str
    message: str
    diff: bytes


def load_changes(repo: str) -> list[Change]:
    """The commits after the initial one, in order."""
    changes = []
    for path in sorted((HERE / repo / "commits").glob("*.patch")):
        message, separator, diff = path.read_bytes().partition(SEPARATOR)
        if not separator or not diff.startswith(b"diff --git "):
            raise SystemExit(f"{path}: expected a message, a '---' line and a git diff")
        changes.append(Change(path.stem, message.decode().strip() + "\n", diff))
    return changes


def git_env() -> dict[str, str]:
    """The caller's environment without any GIT_* variables and without user or system git config."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C", TZ="UTC")
    return env


def git(repo: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", *GIT_OPTIONS, *args], cwd=repo, input=stdin, capture_output=True, env=env or git_env(), check=False
    )
    if result.returncode:
        raise SystemExit(f"git {' '.join(args)} failed in {repo}:\n{result.stderr.decode()}")
    return result.stdout.decode().strip()


def copy_tree(source: Path, dest: Path) -> None:
    """Copy file contents only, so permissions and timestamps of the checkout do not matter."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if SKIPPED_NAMES.intersection(relative.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())


def commit(repo: Path, author: tuple[str, str], index: int, message: str, parent: str | None) -> str:
    """Commit the index with fixed metadata; ``index`` counts commits from 0 and sets the date."""
    name, email = author
    stamp = f"{int((START + timedelta(hours=index)).timestamp())} +0000"
    env = git_env()
    env.update(
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_AUTHOR_DATE=stamp,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
        GIT_COMMITTER_DATE=stamp,
    )
    tree = git(repo, "write-tree")
    parents = ["-p", parent] if parent else []
    sha = git(repo, "commit-tree", "--no-gpg-sign", tree, *parents, stdin=message.encode(), env=env)
    git(repo, "update-ref", "refs/heads/main", sha)
    return sha


def build_repo(name: str, out_dir: Path) -> list[tuple[str, str]]:
    """Build one repository; returns (hash, subject) per commit, oldest first."""
    repo = out_dir / name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    author = REPOS[name]
    git(repo, "init", "--quiet", "--template=")  # no template: no sample hooks, no info/exclude
    copy_tree(HERE / name / "base", repo)
    git(repo, "add", "--all")
    message = (HERE / name / "base-message.txt").read_text(encoding="utf-8").strip() + "\n"
    sha = commit(repo, author, 0, message, None)
    log = [(sha, message.splitlines()[0])]
    for index, change in enumerate(load_changes(name), start=1):
        git(repo, "apply", "--index", "--whitespace=nowarn", "-", stdin=change.diff)
        sha = commit(repo, author, index, change.message, sha)
        log.append((sha, change.message.splitlines()[0]))
    if git(repo, "status", "--porcelain"):
        raise SystemExit(f"{repo}: working tree differs from HEAD after the build")
    issues = out_dir / f"{name}.issues.json"
    issues.write_bytes((HERE / name / "issues.json").read_bytes())
    return log


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python demo/history/build_history.py OUT_DIR", file=sys.stderr)
        return 2
    out_dir = Path(argv[0]).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in REPOS:
        log = build_repo(name, out_dir)
        print(f"{name}: {len(log)} commits, HEAD {log[-1][0][:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
