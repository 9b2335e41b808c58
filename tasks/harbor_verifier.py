"""The verifier an exported Harbor task runs in its container (tests/crucible_verify.py there).

Standard library only: it runs under whatever Python the task's image has, never beside
Crucible. `tasks.harbor` ships this file's source as it is; Crucible's own tests import it.

    crucible_verify.py install TESTS_DIR METADATA    the task's conftest.py files and hidden tests, in place
    crucible_verify.py files METADATA                the test files to hand pytest, one a line
    crucible_verify.py reward JUNIT METADATA OUT     read the JUnit report, write reward.json

The reward is 1.0 only when every FAIL_TO_PASS and PASS_TO_PASS test passed, 0.0 otherwise
(a missing, oversized or unreadable report included). Harbor reads reward.json as a flat
object of numbers, so the counts go there and the names of the tests that did not pass go
beside it, in verdict.json.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree import ElementTree

WORKSPACE = Path(os.environ.get("CRUCIBLE_WORKSPACE", "/app"))
MAX_REPORT_BYTES = 32 * 1024 * 1024
MAX_METADATA_BYTES = 1 << 20
FAILED_TAGS = ("failure", "error", "skipped")


class VerifyError(ValueError):
    pass


def read_small(path: Path, limit: int) -> bytes:
    """A regular file of at most `limit` bytes, opened without following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise VerifyError(f"{path}: cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise VerifyError(f"{path}: not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise VerifyError(f"{path}: larger than {limit} bytes")
    return data


def load_metadata(path: Path) -> dict[str, Any]:
    meta = json.loads(read_small(path, MAX_METADATA_BYTES))
    if not isinstance(meta, dict):
        raise VerifyError(f"{path}: not a JSON object")
    return meta


def tests_dest(meta: dict[str, Any]) -> PurePosixPath:
    dest = PurePosixPath(str(meta.get("tests_dest", "tests")))
    if dest.is_absolute() or ".." in dest.parts:
        raise VerifyError(f"tests_dest {str(dest)!r} must be a path inside the repository")
    return dest


def real_dir(path: Path) -> Path:
    """A directory at `path`, whatever was there: a link the agent left would lead the copy elsewhere."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(exist_ok=True)
    return path


def install(tests: Path, meta: dict[str, Any], workspace: Path = WORKSPACE) -> int:
    """Put the task's own conftest.py files and hidden tests in place over the agent's; the count copied."""
    purge(workspace)
    copied = copy_into(tests / "conftests", workspace)
    dest = workspace
    for part in tests_dest(meta).parts:
        dest = real_dir(dest / part)
    return copied + copy_into(tests / "hidden", dest)


def purge(workspace: Path) -> None:
    """Bytecode and conftest.py files are the agent's way into the test run: none of its own survive."""
    for root, dirs, files in os.walk(workspace):  # links are listed, never followed
        for name in list(dirs):
            if name == "__pycache__":
                path = Path(root) / name
                path.unlink() if path.is_symlink() else shutil.rmtree(path)
                dirs.remove(name)
        for name in files:
            if name == "conftest.py" or name.endswith((".pyc", ".pyo")):
                (Path(root) / name).unlink()


def copy_into(source: Path, dest: Path) -> int:
    """Copy the files under `source` (this folder's own) to the same paths under `dest`."""
    copied = 0
    for root, dirs, files in os.walk(source):
        rel = Path(root).relative_to(source)
        target_dir = dest
        for part in rel.parts:
            target_dir = real_dir(target_dir / part)
        dirs.sort()
        for name in sorted(files):
            target = target_dir / name
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.exists():
                shutil.rmtree(target)
            shutil.copyfile(Path(root) / name, target, follow_symlinks=False)
            copied += 1
    return copied


def wanted(meta: dict[str, Any]) -> tuple[list[str], list[str]]:
    lists = []
    for key in ("fail_to_pass", "pass_to_pass"):
        value = meta.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise VerifyError(f"{key} must be a list of test ids")
        lists.append(value)
    return lists[0], lists[1]


def test_files(meta: dict[str, Any]) -> list[str]:
    """The files that hold the tests to check: pytest is given these, not the whole repository."""
    fail_to_pass, pass_to_pass = wanted(meta)
    files = {test.split("::", 1)[0] for test in (*fail_to_pass, *pass_to_pass)}
    for name in files:
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or name.startswith("-"):
            raise VerifyError(f"test id {name!r} does not name a file inside the repository")
    return sorted(files)


def node_id(file: str, classname: str, name: str) -> str:
    """pytest's node id from JUnit xunit1 attributes (file=tests/t.py classname=tests.t.TestC)."""
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    if module and (classname == module or classname.startswith(module + ".")):
        inner = classname[len(module) :].strip(".")
        parts = [file, *inner.split(".")] if inner else [file]
    else:
        dotted = classname.split(".")
        parts = ["/".join(dotted) + ".py"] if classname else []
    return "::".join([*parts, name])


def outcomes(report: bytes) -> dict[str, bool]:
    """Each test case's node id and whether it passed; the worst report wins for a repeated id."""
    # pytest writes no DOCTYPE; one here could only declare entities to expand.
    if b"<!DOCTYPE" in report.upper() or b"<!ENTITY" in report.upper():
        raise VerifyError("the JUnit report declares a DOCTYPE or entities")
    try:
        root = ElementTree.fromstring(report)  # noqa: S314 - stdlib only in the image; DOCTYPE refused above
    except ElementTree.ParseError as exc:
        raise VerifyError(f"the JUnit report is not XML ({exc})") from None
    seen: dict[str, bool] = {}
    for case in root.iter("testcase"):
        node = node_id(case.get("file", ""), case.get("classname", ""), case.get("name", ""))
        passed = not any(case.find(tag) is not None for tag in FAILED_TAGS)
        seen[node] = seen.get(node, True) and passed
    return seen


def verdict(
    report: bytes | None, meta: dict[str, Any], problem: str = "", read: Callable[[bytes], dict[str, bool]] = outcomes
) -> dict[str, Any]:
    """`read` turns the report into each test id's pass: the JUnit reader here, Go's or JavaScript's
    in crucible_lang_verify.py."""
    fail_to_pass, pass_to_pass = wanted(meta)
    seen = {}
    if report is not None and not problem:
        try:
            seen = read(report)
        except VerifyError as exc:
            problem = str(exc)
    missing = [t for t in (*fail_to_pass, *pass_to_pass) if not seen.get(t, False)]
    rewards = {
        "reward": 1.0 if fail_to_pass or pass_to_pass else 0.0,
        "fail_to_pass_passed": sum(1 for t in fail_to_pass if seen.get(t, False)),
        "fail_to_pass_total": len(fail_to_pass),
        "pass_to_pass_passed": sum(1 for t in pass_to_pass if seen.get(t, False)),
        "pass_to_pass_total": len(pass_to_pass),
    }
    if missing or problem:
        rewards["reward"] = 0.0
    return {"rewards": rewards, "not_passed": missing[:200], "problem": problem}


def reward(junit: Path, meta_path: Path, out: Path) -> float:
    meta = load_metadata(meta_path)
    try:
        report: bytes | None = read_small(junit, MAX_REPORT_BYTES)
        problem = ""
    except VerifyError as exc:
        report, problem = None, str(exc)
    result = verdict(report, meta, problem)
    write_new(out, json.dumps(result["rewards"]) + "\n")
    write_new(out.parent / "verdict.json", json.dumps(result, indent=2) + "\n")
    return float(result["rewards"]["reward"])


def write_new(path: Path, text: str) -> None:
    """Replace whatever is at `path` (a reward file left by the agent, a link) with `text`."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["install"] and len(argv) == 3:
            print(f"installed {install(Path(argv[1]), load_metadata(Path(argv[2])))} files")
        elif argv[:1] == ["files"] and len(argv) == 2:
            print("\n".join(test_files(load_metadata(Path(argv[1])))))
        elif argv[:1] == ["reward"] and len(argv) == 4:
            print(f"reward {reward(Path(argv[1]), Path(argv[2]), Path(argv[3]))}")
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (VerifyError, OSError, ValueError) as exc:
        print(f"crucible_verify: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
