"""Sorting an agent's file patches into what may be scored, new tests, and protected paths."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from patches import FilePatch, is_test_path

# Files that configure or replace the test runner: an edit here changes how tests
# are run or reported, not what the code does.
TEST_CONFIG_FILES = frozenset({"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", ".pytest.ini", "noxfile.py"})
INTERPRETER_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
SHADOWED_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "unittest",
        "iniconfig",
        "xdist",
        "coverage",
        "junitparser",
        "site",
        "typing_extensions",
    }
)


@dataclass
class Classified:
    kept: list[FilePatch] = field(default_factory=list)
    new_tests: list[FilePatch] = field(default_factory=list)
    protected: list[tuple[FilePatch, str]] = field(default_factory=list)  # (patch, why)

    def kept_text(self) -> str:
        # The agent's own text, not a rendering of our model: git applies exactly what was submitted.
        return "".join(p.text if p.text.endswith("\n") else p.text + "\n" for p in self.kept)


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
    parent = pure.parts[-2] if len(pure.parts) > 1 else None
    if stem in SHADOWED_MODULES or top in SHADOWED_MODULES or parent in SHADOWED_MODULES:
        return "shadows test tooling"
    if path in base_files and is_test_path(path, tests_dest):
        return "existing test file"
    return None


def classify(patches: list[FilePatch], tests_dest: str, base_files: set[str]) -> Classified:
    result = Classified()
    for patch in patches:
        reasons = [r for r in (protection(p, tests_dest, base_files) for p in sorted(patch.paths)) if r]
        if reasons:
            result.protected.append((patch, reasons[0]))
        elif patch.old_path is None and patch.new_path and is_test_path(patch.new_path, tests_dest):
            result.new_tests.append(patch)
        else:
            result.kept.append(patch)
    return result
