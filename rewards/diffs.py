"""Splitting an agent's diff into per-file patches and sorting out what may be scored."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

HEADER_RE = re.compile(r"^diff --git a/(.+?) b/(.+)$")
# Files that configure or replace the test runner: an edit here changes how tests
# are run or reported, not what the code does.
TEST_CONFIG_FILES = frozenset({"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", ".pytest.ini", "noxfile.py"})
INTERPRETER_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
SHADOWED_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "unittest", "iniconfig", "xdist", "coverage",
                              "junitparser", "site", "typing_extensions"})


@dataclass
class FilePatch:
    old_path: str | None  # None for a new file
    new_path: str | None  # None for a deleted file
    text: str
    binary: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    def added_lines(self) -> list[tuple[int, str]]:
        """(line number in the new file, text) of each added line."""
        out: list[tuple[int, str]] = []
        number = 0
        for line in self.text.splitlines():
            if line.startswith("@@"):
                match = re.search(r"\+(\d+)", line)
                number = int(match.group(1)) if match else 0
            elif line.startswith("+") and not line.startswith("+++"):
                out.append((number, line[1:]))
                number += 1
            elif line.startswith(" "):
                number += 1
        return out


@dataclass
class Classified:
    kept: list[FilePatch] = field(default_factory=list)
    new_tests: list[FilePatch] = field(default_factory=list)
    protected: list[tuple[FilePatch, str]] = field(default_factory=list)  # (patch, why)

    def kept_text(self) -> str:
        return "".join(p.text if p.text.endswith("\n") else p.text + "\n" for p in self.kept)


class DiffError(ValueError):
    pass


def _strip_prefix(path: str) -> str | None:
    path = path.strip().split("\t")[0]
    if path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def split_patch(patch: str) -> list[FilePatch]:
    """Per-file patches of a git diff, or of a plain unified diff with ---/+++ headers."""
    lines = patch.splitlines(keepends=True)
    git_style = any(line.startswith("diff --git ") for line in lines)
    blocks: list[list[str]] = []
    for i, line in enumerate(lines):
        if git_style:
            starts = line.startswith("diff --git ")
        else:
            starts = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        if starts or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return [_file_patch("".join(block)) for block in blocks if "".join(block).strip() and _names_a_file(block)]


def _names_a_file(block: list[str]) -> bool:
    return any(line.startswith(("diff --git ", "--- ", "+++ ")) for line in block)


def _file_patch(text: str) -> FilePatch:
    old = new = None
    header = HEADER_RE.match(text.splitlines()[0])
    if header:
        old, new = header.group(1), header.group(2)
    for line in text.splitlines():
        if line.startswith("--- "):
            old = _strip_prefix(line[4:])
        elif line.startswith("+++ "):
            new = _strip_prefix(line[4:])
            break
    if "\nnew file mode" in text or text.startswith("new file mode"):
        old = None
    if "\ndeleted file mode" in text:
        new = None
    if old is None and new is None:
        raise DiffError("a file patch names no file")
    return FilePatch(old, new, text, binary="GIT binary patch" in text or "Binary files " in text)


def is_test_path(path: str, tests_dest: str) -> bool:
    pure = PurePosixPath(path)
    name = pure.name
    dest = PurePosixPath(tests_dest)
    return (
        name.startswith("test_") and name.endswith(".py")
        or name.endswith("_test.py")
        or pure.is_relative_to(dest)
        or any(part in ("tests", "test", "testing") for part in pure.parts[:-1])
    )


def protection(path: str, tests_dest: str, base_files: set[str]) -> str | None:
    """Why a path is protected from the agent, or None."""
    pure = PurePosixPath(path)
    name = pure.name
    if ".." in pure.parts or pure.is_absolute():
        return "path outside the repository"
    if pure.parts and pure.parts[0] == ".git":
        return "git metadata"
    if name == "conftest.py":
        return "conftest.py changes how tests run"
    if name in TEST_CONFIG_FILES:
        return "test runner configuration"
    if name in INTERPRETER_HOOKS or name.endswith(".pth"):
        return "interpreter start-up hook"
    stem = name[:-3] if name.endswith(".py") else None
    top = pure.parts[0] if pure.parts else ""
    if stem in SHADOWED_MODULES or top in SHADOWED_MODULES or (len(pure.parts) > 1 and pure.parts[-2] in SHADOWED_MODULES):
        return "shadows test tooling"
    if path in base_files and is_test_path(path, tests_dest):
        return "existing test file"
    return None


def classify(patches: list[FilePatch], tests_dest: str, base_files: set[str]) -> Classified:
    result = Classified()
    for patch in patches:
        paths = {p for p in (patch.old_path, patch.new_path) if p}
        reasons = [r for r in (protection(p, tests_dest, base_files) for p in sorted(paths)) if r]
        if reasons:
            result.protected.append((patch, reasons[0]))
        elif patch.old_path is None and patch.new_path and is_test_path(patch.new_path, tests_dest):
            result.new_tests.append(patch)
        else:
            result.kept.append(patch)
    return result
