"""Admission of an agent's patch, file by file: what may be applied before the hidden tests run.

A patch may change text source and documentation. Everything else is set aside, never
applied, and named in a flag with its evidence:

- protected paths (tests that exist, conftest.py, runner configuration, start-up hooks,
  modules that shadow test tooling): the runner's own inputs;
- new test files: kept out of the run, not punished;
- what the spec's `admission.refuse` names (rewards.spec.ADMISSION_RULES): binary content,
  bytecode, packaging metadata, git's own configuration, symlinks that leave the tree and
  executable-bit changes. Each is a way to change what runs without changing the source
  the detectors read: a `.pyc` that holds the "fix", a `*.dist-info` whose entry point
  pytest loads as a plugin, a `.gitignore` that lets `Sandbox.diff()` carry bytecode.

A "GIT binary patch" whose content decodes as UTF-8 text is judged as text: it is turned
into the equivalent text patch, so the path and mode rules, the symlink check and every
static detector see the lines it really adds.

Plain Python (no Django): a remote worker and a training subprocess admit patches too.
"""

from __future__ import annotations

import codecs
import logging
import os
import posixpath
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from core.vocabulary import Detector
from patches import FilePatch, FileStatus, PatchError, is_test_path, render, text_hunks
from patches.binary import new_content
from patches.model import SYMLINK_MODE
from rewards.anticheat import Flag
from tasks.lang_tests import PYTHON, is_lang_test_path

logger = logging.getLogger(__name__)

# Files that configure or replace the test runner: an edit here changes how tests
# are run or reported, not what the code does. (pytest 9 reads pytest.toml first.)
TEST_CONFIG_FILES = frozenset(
    {"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py"}
)
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
# The runner itself: never the repository's to change, even where the repository is one of them.
RUNNER_CORE = frozenset({"pytest", "_pytest", "py", "pluggy", "unittest", "site"})
REGULAR, EXECUTABLE, GITLINK = "100644", "100755", "160000"
VCS_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules"})
# importlib.metadata finds a distribution (and so a pytest11 entry point) in any of these on sys.path.
METADATA_DIR_SUFFIXES = (".dist-info", ".egg-info", ".egg")
METADATA_FILES = frozenset({"entry_points.txt", "egg-info", "pkg-info"})
METADATA_FILE_SUFFIXES = (".pth", ".egg-link")
BYTECODE_SUFFIXES = (".pyc", ".pyo")


@dataclass
class Admission:
    kept: list[FilePatch] = field(default_factory=list)
    new_tests: list[FilePatch] = field(default_factory=list)
    protected: list[tuple[FilePatch, str]] = field(default_factory=list)  # (patch, why)
    refused: list[tuple[FilePatch, str, str]] = field(default_factory=list)  # (patch, rule, evidence)
    # Paths whose binary patch decoded as text and is kept as the equivalent text patch.
    decoded: list[str] = field(default_factory=list)

    def kept_text(self) -> str:
        # The agent's own text, not a rendering of our model: git applies exactly what was
        # submitted. A decoded binary patch is the one exception: its text is our rendering.
        return "".join(p.text if p.text.endswith("\n") else p.text + "\n" for p in self.kept)


def protection(path: str, tests_dest: str, base_files: Collection[str], language: str = PYTHON) -> str | None:
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
    if _shadows(pure, base_files):
        return "shadows test tooling"
    if path in base_files and is_test(path, tests_dest, language):
        return "existing test file"
    return None


def is_test(path: str, tests_dest: str, language: str = PYTHON) -> bool:
    """Whether a path is a test file, as the task's language names its tests (tasks.lang_tests)."""
    return is_test_path(path, tests_dest) if language == PYTHON else is_lang_test_path(path, tests_dest, language)


def _shadows(pure: PurePosixPath, base_files: Collection[str]) -> bool:
    """Whether a path puts a module of test tooling's name where the repository has none of its own.

    The repository's own module of such a name (iniconfig's iniconfig) is the code under test:
    pytest imported its own copy before the workspace went on sys.path and keeps it, so an edit
    there changes what the tests import, not the runner (sandbox.hermetic's workspace path plugin).
    """
    parts = pure.parts
    stem = parts[-1][:-3] if parts and parts[-1].endswith(".py") else None
    places = [
        (len(parts) - 1, stem),
        (0, parts[0] if parts else ""),
        (len(parts) - 2, parts[-2] if len(parts) > 1 else None),
    ]
    for index, module in places:
        if module in SHADOWED_MODULES and (module in RUNNER_CORE or not _in_base(parts[: index + 1], base_files)):
            return True
    return False


def _in_base(prefix: tuple[str, ...], base_files: Collection[str]) -> bool:
    where = "/".join(prefix)
    return where in base_files or any(f.startswith(where + "/") for f in base_files)


def path_rule(path: str) -> tuple[str, str] | None:
    """(rule, why) when a path alone makes a change inadmissible, whatever it holds."""
    parts = [part.lower() for part in PurePosixPath(path).parts]
    name = parts[-1] if parts else ""
    if "__pycache__" in parts or name.endswith(BYTECODE_SUFFIXES):
        return "bytecode", "Python bytecode runs instead of the source beside it"
    if any(part.endswith(METADATA_DIR_SUFFIXES) for part in parts[:-1]) or name.endswith(METADATA_DIR_SUFFIXES):
        return "packaging_metadata", "installed-package metadata (entry points load as pytest plugins)"
    if name in METADATA_FILES or name.endswith(METADATA_FILE_SUFFIXES):
        return "packaging_metadata", "packaging metadata or a start-up path file"
    if name in VCS_FILES:
        return "vcs_config", "git configuration (what a diff carries, how files are filtered)"
    if ".git" in parts:
        return "vcs_config", "git metadata"
    return None


def mode_rule(patch: FilePatch) -> tuple[str, str] | None:
    """(rule, why) for a mode the patch sets: the executable bit, a gitlink, a file-type change."""
    modes = {m for m in (patch.old_mode, patch.new_mode) if m}
    if GITLINK in modes:
        return "vcs_config", f"a submodule (gitlink, mode {GITLINK})"
    if patch.status is FileStatus.ADDED:
        if patch.new_mode not in (None, REGULAR, SYMLINK_MODE):
            return "mode_change", f"adds the file with mode {patch.new_mode}"
        return None
    if patch.old_mode and patch.new_mode and patch.old_mode != patch.new_mode:
        return "mode_change", f"changes the mode {patch.old_mode} -> {patch.new_mode}"
    if any(m not in (REGULAR, EXECUTABLE, SYMLINK_MODE) for m in modes):
        return "mode_change", f"an unusual file mode {sorted(modes)}"
    return None


def _is_text(data: bytes) -> bool:
    # git calls a file with a NUL byte binary, and Python refuses source that holds one.
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _base_content(base_dir: Path | None, path: str | None) -> bytes | None:
    """A base file's bytes as git sees them (a symlink is its target), None when absent."""
    if base_dir is None or path is None:
        return None
    where = base_dir / path
    if where.is_symlink():
        return os.readlink(where).encode("utf-8", "surrogateescape")
    try:
        return where.read_bytes() if where.is_file() else None
    except OSError:
        return None


def decode_binary(patch: FilePatch, base_dir: Path | None) -> FilePatch | str:
    """The text patch equal to a binary one, or why it is binary after all."""
    if not patch.binary_hunks:
        return 'a binary change without its data ("Binary files ... differ")'
    old = _base_content(base_dir, patch.old_path)
    if patch.old_path is not None and old is None:
        return f"its original {patch.old_path} is not in the base"
    try:
        new = new_content(patch, old)
    except PatchError as exc:
        return f"its data cannot be decoded ({exc})"
    for side, data in (("original", old), ("new content", new)):
        if data is not None and not _is_text(data):
            return f"its {side} is not UTF-8 text"
    old_text = None if old is None else old.decode("utf-8")
    new_text = None if new is None else new.decode("utf-8")
    text = FilePatch(
        patch.old_path,
        patch.new_path,
        patch.status,
        text_hunks(old_text or "", new_text or ""),
        old_mode=patch.old_mode or (REGULAR if patch.status is FileStatus.DELETED else None),
        new_mode=patch.new_mode or (REGULAR if patch.status is FileStatus.ADDED else None),
        similarity=patch.similarity,
    )
    text.text = render(text)
    return text


def symlink_target(patch: FilePatch) -> str | None:
    """The target a text patch gives a symlink (its one line of content), None when it sets none."""
    if patch.new_path is None or SYMLINK_MODE not in (patch.new_mode, patch.old_mode) or not patch.hunks:
        return None
    # A symlink is one line with no newline, so each hunk holds all of it.
    return "".join(hunk.after() for hunk in patch.hunks)


def leaves_tree(link: str, target: str) -> bool:
    if not target or "\n" in target or "\0" in target or target.startswith("/"):
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    return resolved == ".." or resolved.startswith("../") or resolved.startswith("/")


def admit(
    file_patches: Iterable[FilePatch],
    tests_dest: str,
    base_files: Collection[str],
    spec_admission: Collection[str],
    base_dir: Path | None = None,
    language: str = PYTHON,
) -> Admission:
    """Sort file patches into kept (applied), new tests, protected and refused.

    `spec_admission` is the reward spec's `admission.refuse`; `base_dir` is the task's
    base snapshot, which a binary delta (or a modified file's decoded text) needs; `language`
    the task's, which says what a test file is (a Go `*_test.go` beside the code it tests).
    """
    result = Admission()
    for patch in file_patches:
        reasons = [r for r in (protection(p, tests_dest, base_files, language) for p in sorted(patch.paths)) if r]
        if reasons:
            result.protected.append((patch, reasons[0]))
            continue
        if patch.old_path is None and patch.new_path and is_test(patch.new_path, tests_dest, language):
            # Never applied, so nothing in it can reach the run: set aside whatever it holds.
            result.new_tests.append(patch)
            continue
        refusal = _refusal(patch, spec_admission)
        if refusal is None and patch.binary:
            decoded = decode_binary(patch, base_dir)
            if isinstance(decoded, str):
                refusal = ("binary", f"binary content: {decoded}") if "binary" in spec_admission else None
            else:
                # Judged as text from here on: a text edit of this path must be admissible too.
                result.decoded.append(patch.path)
                patch = decoded
                refusal = _refusal(patch, spec_admission)
                if not patch.hunks and patch.status is FileStatus.MODIFIED and patch.old_mode == patch.new_mode:
                    continue  # decodes to the base content: nothing to apply
        if refusal is None and "symlink_outside" in spec_admission:
            target = symlink_target(patch)
            if target is not None and leaves_tree(patch.path, target):
                refusal = ("symlink_outside", f"a symlink to {target[:200]!r}, outside the repository")
        if refusal is not None:
            rule, why = refusal
            result.refused.append((patch, rule, f"{patch.path}: {why}"))
            logger.info("admission refused %s (%s): %s", patch.path, rule, why)
            continue
        result.kept.append(patch)
    return result


def _refusal(patch: FilePatch, refuse: Collection[str]) -> tuple[str, str] | None:
    for path in patch.paths:
        found = path_rule(path)
        if found is not None and found[0] in refuse:
            return found
    found = mode_rule(patch)
    if found is not None and found[0] in refuse:
        return found
    found = encoding_rule(patch)
    if found is not None and found[0] in refuse:
        return found
    return None


CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def encoding_rule(patch: FilePatch) -> tuple[str, str] | None:
    """(rule, why) for Python source declaring an encoding this Python does not have.

    Only a codec registered at run time (by the patch's own code, say) reads such a file: the
    interpreter imports it, while every static check sees a file it cannot decode.
    """
    if patch.new_path is None or not patch.new_path.endswith((".py", ".pyw")) or not patch.hunks:
        return None
    text = "".join(hunk.after() for hunk in patch.hunks[:1]) if patch.hunks[0].old_start <= 2 else ""
    for line in text.encode("utf-8", "surrogateescape").splitlines()[:2]:
        found = CODING_COOKIE.match(line)
        if found is None:
            continue
        name = found.group(1).decode("ascii", "replace")
        try:
            codecs.lookup(name)
        except LookupError:
            return "source_encoding", f"declares the encoding {name[:40]!r}, which only code run later could register"
        return None
    return None


def admission_flags(admission: Admission) -> list[Flag]:
    """One flag per file set aside: protected paths (and deleted tests), then inadmissible changes."""
    flags = []
    for patch, why in admission.protected:
        deleted = patch.new_path is None
        detector = Detector.TEST_DELETION if deleted and why == "existing test file" else Detector.PROTECTED_PATH_EDIT
        verb = "deletes" if deleted else "changes"
        flags.append(Flag(detector, f"{verb} {patch.path}: {why}", patch.path))
    for patch, rule, evidence in admission.refused:
        flags.append(Flag(Detector.INADMISSIBLE_CHANGE, f"{rule}: {evidence}", patch.path))
    return flags
