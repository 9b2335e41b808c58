"""What a repository's tests need installed, read from its own files (never by running them).

`detect_environment` reads `pyproject.toml` ([project] dependencies, test extras, PEP 735
dependency groups with their `include-group`s), `setup.cfg` ([options] install_requires, test
extras), `setup.py` (its `setup(...)` call's literal arguments, parsed, never executed) and
`requirements*.txt`, finds a `src/` layout (and the import paths its pytest `pythonpath` names),
the version module hatch-vcs or setuptools-scm would generate, reads the repository's pytest
settings as data (sandbox.pytest_settings), and chooses the test runner: the repository's own pytest pin when it
has one, else the runner Crucible ships, or the last release before pytest 9 when its conftest
still uses the `py.path` hook arguments pytest 9 removed. Each requirement's PEP 508 marker is
evaluated for the environment's Python: one for another Python is left out, not taken for the
package's pin. The result is an `EnvSpec`, or None when the bare runner is all the tests need.

Plain Python: the builders, `build_env` and a remote worker use it alike.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import logging
import posixpath
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from patches import is_test_path, pysource
from sandbox.distinfo import MAX_VERSION_FILES, Project, ProjectError, check_version_file
from sandbox.environments import (
    MAX_PYTHONPATH,
    EnvBuildError,
    EnvSpec,
    check_requirement,
    current_python,
    normalise,
)
from sandbox.pytest_settings import read_pythonpath, read_settings

logger = logging.getLogger(__name__)

TEST_EXTRAS = ("test", "tests", "testing", "pytest")
DEV_EXTRAS = ("dev", "develop", "development")
# Tools that dev extras carry and tests never import: not worth installing, often not installable.
TOOLING = frozenset(
    normalise(name)
    for name in (
        "black",
        "build",
        "bump2version",
        "check-manifest",
        "coverage",
        "codecov",
        "flake8",
        "flit",
        "furo",
        "ipython",
        "isort",
        "mypy",
        "pre-commit",
        "pylint",
        "pytest-cov",
        "ruff",
        "setuptools-scm",
        "sphinx",
        "sphinx-rtd-theme",
        "tox",
        "twine",
        "wheel",
    )
)
REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-test.txt",
    "requirements-tests.txt",
    "requirements_test.txt",
    "requirements-testing.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
    "requirements/base.txt",
    "requirements/requirements.txt",
)
MAX_FILE_BYTES = 512 * 1024
# The code reads distribution metadata: it then needs its own (sandbox.distinfo).
READS_METADATA = re.compile(r"importlib[._]metadata|\bimportlib_metadata\b|\bpkg_resources\b")
MAX_SCANNED_MODULES = 2000
VERSION_LITERAL = re.compile(r"^__version__\s*(?::\s*str\s*)?=\s*[\"']([^\"']{1,60})[\"']", re.MULTILINE)
UNKNOWN_VERSION = "0+unknown"
# pytest 9 dropped the py.path `path` arguments of these hooks; a conftest that still takes them
# errors out before any test runs ("no JUnit report was written").
PY_PATH_HOOK = re.compile(
    r"def\s+pytest_(?:ignore_collect|collect_file|pycollect_makemodule|report_header)\s*\(\s*path\b"
)
LAST_PYTEST_WITH_PY_PATH = "pytest<9"


@dataclass
class Detected:
    """What was found, where, and what was left out (shown by `build_env`, kept in the build log)."""

    spec: EnvSpec | None
    sources: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    runner: str = ""


def parse_variables(pairs: Sequence[str]) -> list[tuple[str, str]]:
    """`NAME=VALUE` strings from a command line as pairs; checked with the spec (EnvSpec)."""
    found = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise EnvBuildError(f"test environment variable {pair[:80]!r}: expected NAME=VALUE")
        found.append((name, value))
    return found


def variable_argument(text: str) -> str:
    """argparse `type` for `--test-env NAME=VALUE`: refused before anything is built."""
    try:
        EnvSpec(requirements=(), variables=tuple(parse_variables([text])))
    except EnvBuildError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def runner_pytest() -> str:
    return f"pytest=={metadata.version('pytest')}"


def detect_environment(repo: Path, pytest: str = "", variables: Sequence[tuple[str, str]] = ()) -> Detected:
    """The environment `repo`'s tests need; `pytest` overrides the runner choice (a requirement such as 'pytest<8'),
    `variables` are the tests' set-up (NAME, value) pairs, given by whoever builds the tasks."""
    found: list[str] = []
    sources: list[str] = []
    skipped: list[str] = []
    _check_python(repo)
    for reader in (_pyproject, _setup_cfg, _setup_py, _requirement_files):
        lines, where = reader(repo, skipped)
        if lines:
            sources.append(where)
            found += lines
    own = _own_names(repo)
    requirements: dict[str, str] = {}
    target = _marker_environment(current_python())
    for line in found:
        try:
            requirement = check_requirement(line)
        except EnvBuildError as exc:
            skipped.append(str(exc))
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(target):
            # "pytest<8; python_version < '3.8'" beside "pytest>=8; python_version >= '3.8'": the
            # alternative for another Python is not this environment's (nor the first one read).
            skipped.append(f"{line[:120]!r}: not for Python {target['python_version']}")
            continue
        name = normalise(requirement.name)
        if name in own or name in TOOLING or name in requirements:
            continue
        requirements[name] = str(requirement)
    runner, why = _choose_pytest(repo, requirements.pop("pytest", ""), pytest)
    pythonpath = _import_paths(repo)
    settings, ignored, settings_file = read_settings(repo)
    skipped += [f"pytest settings: {item}" for item in ignored]
    if settings_file and settings:
        sources.append(f"{settings_file} (pytest settings)")
    project = _project(repo, skipped) if _reads_own_metadata(repo) else None
    version_files = _version_files(repo, project)
    if not (requirements or pythonpath or variables or settings or project or version_files) and why == "default":
        return Detected(None, sources, skipped, runner)
    spec = EnvSpec(
        requirements=tuple(sorted([runner, *requirements.values()])),
        pythonpath=pythonpath,
        variables=tuple(sorted(dict(variables).items())),
        pytest=settings,
        project=project,
        version_files=version_files,
    )
    return Detected(spec, sources, skipped, runner)


def _import_paths(repo: Path) -> tuple[str, ...]:
    """The pytest `pythonpath` setting's directories, then a `src/` layout's `src`."""
    paths = [posixpath.normpath(entry) for entry in read_pythonpath(repo)]
    if _src_layout(repo):
        paths.append("src")
    return tuple(dict.fromkeys(paths))[:MAX_PYTHONPATH]


def _version_files(repo: Path, project: Project | None) -> tuple[tuple[str, str], ...]:
    """The version modules hatch-vcs or setuptools-scm would write at build time, with the
    declared version (else the fallback the configuration names), where the snapshot has none."""
    data = _toml(repo / "pyproject.toml")
    tool, declared = _table(data, "tool"), _table(data, "project").get("version")
    scm, hatch = _table(tool, "setuptools_scm"), _table(tool, "hatch")
    vcs = _table(_table(_table(hatch, "build"), "hooks"), "vcs")
    raw = _table(_table(hatch, "version"), "raw-options")
    paths = [vcs.get("version-file"), scm.get("version_file"), scm.get("write_to")]
    fallback = scm.get("fallback_version") or raw.get("fallback_version")
    version = project.version if project is not None else declared if isinstance(declared, str) else ""
    if not version or version == UNKNOWN_VERSION:
        version = fallback if isinstance(fallback, str) else version or UNKNOWN_VERSION
    found: list[tuple[str, str]] = []
    for path in dict.fromkeys(posixpath.normpath(p) for p in paths if isinstance(p, str)):
        try:
            check_version_file(path, version)
        except ProjectError:
            continue
        if not (repo / path).exists() and not (repo / path).is_symlink():
            found.append((path, version))
    return tuple(found[:MAX_VERSION_FILES])


def _table(table: dict[str, object], key: str) -> dict[str, object]:
    value = table.get(key)
    return value if isinstance(value, dict) else {}


def _reads_own_metadata(repo: Path) -> bool:
    """Whether the repository's code (not its tests) reads distribution metadata, and so needs its own."""
    modules = (p for p in sorted(repo.rglob("*.py")) if not is_test_path(str(p.relative_to(repo)), "tests"))
    for count, path in enumerate(modules):
        if count >= MAX_SCANNED_MODULES:
            break
        if READS_METADATA.search(_text(path)):
            return True
    return False


def _project(repo: Path, skipped: list[str]) -> Project | None:
    """The name, version and entry points the repository's packaging files declare, as data."""
    project = _toml(repo / "pyproject.toml").get("project")
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(_text(repo / "setup.cfg"))
    except configparser.Error:
        cfg = configparser.ConfigParser(interpolation=None)
    name = version = ""
    points: list[tuple[str, str, str]] = []
    if isinstance(project, dict) and isinstance(project.get("name"), str):
        declared = project.get("version")
        name, version = project["name"], declared if isinstance(declared, str) else ""
        for group, table in (("console_scripts", project.get("scripts")), ("gui_scripts", project.get("gui-scripts"))):
            points += _points(group, table)
        groups = project.get("entry-points")
        for group, table in groups.items() if isinstance(groups, dict) else ():
            points += _points(str(group), table)
    elif cfg.has_option("metadata", "name"):
        name = cfg.get("metadata", "name").strip()
    if not version and cfg.has_option("metadata", "version") and not cfg.get("metadata", "version").startswith("attr:"):
        version = cfg.get("metadata", "version").strip()
    if not points and cfg.has_section("options.entry_points"):
        for group, lines in cfg.items("options.entry_points"):
            entries = dict(line.split("=", 1) for line in _cfg_lines(lines) if "=" in line)
            points += _points(group, {k.strip(): v.strip() for k, v in entries.items()})
    if not name:
        return None
    version = version or _version_literal(repo, name) or UNKNOWN_VERSION
    try:
        return Project(name, version, tuple(points))
    except ProjectError as exc:
        skipped.append(f"project metadata: {exc}")
        try:
            return Project(name, UNKNOWN_VERSION)
        except ProjectError:
            return None


def _points(group: str, table: object) -> list[tuple[str, str, str]]:
    if not isinstance(table, dict):
        return []
    return [(group, str(k), v) for k, v in table.items() if isinstance(v, str)]


def _version_literal(repo: Path, name: str) -> str:
    """`__version__ = "1.2"` in the package's own __init__, where the version is dynamic."""
    package = normalise(name).replace("-", "_")
    for candidate in (repo / "src" / package / "__init__.py", repo / package / "__init__.py", repo / f"{package}.py"):
        found = VERSION_LITERAL.search(_text(candidate))
        if found:
            return found.group(1)
    return ""


def _marker_environment(python: str) -> dict[str, str]:
    """PEP 508 marker values for an environment of `python` on this host (no extra selected)."""
    values: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    if values["python_version"] != python:
        values.update(python_version=python, python_full_version=f"{python}.0")
    values["extra"] = ""
    return values


def _check_python(repo: Path) -> None:
    project = _toml(repo / "pyproject.toml").get("project")
    declared = project.get("requires-python") if isinstance(project, dict) else None
    if not isinstance(declared, str):
        return
    try:
        allowed = SpecifierSet(declared)
    except InvalidSpecifier:
        return
    here = Version(current_python() + ".0")
    if here not in allowed and Version(current_python() + ".99") not in allowed:
        raise EnvBuildError(f"the repository requires Python {declared}; this host has only Python {current_python()}")


def _choose_pytest(repo: Path, pinned: str, override: str) -> tuple[str, str]:
    if override:
        return str(check_requirement(override)), "override"
    if pinned:
        return pinned, "pinned"
    for conftest in (
        list(repo.glob("conftest.py")) + list(repo.glob("*/conftest.py")) + list(repo.glob("*/*/conftest.py"))
    ):
        if PY_PATH_HOOK.search(_text(conftest)):
            return LAST_PYTEST_WITH_PY_PATH, "py.path hooks"
    return runner_pytest(), "default"


def _src_layout(repo: Path) -> bool:
    src = repo / "src"
    if not src.is_dir() or src.is_symlink():
        return False
    return any((entry / "__init__.py").is_file() or entry.suffix == ".py" for entry in src.iterdir())


def _own_names(repo: Path) -> set[str]:
    names = {normalise(repo.name)}
    project = _toml(repo / "pyproject.toml").get("project")
    if isinstance(project, dict) and isinstance(project.get("name"), str):
        names.add(normalise(project["name"]))
    return names


def _text(path: Path) -> str:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return ""
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(_text(path))
    except tomllib.TOMLDecodeError:
        return {}


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _extras(table: dict[str, object]) -> list[str]:
    keys = [k for k in TEST_EXTRAS if k in table] or [k for k in DEV_EXTRAS if k in table]
    return [line for k in keys for line in _strings(table[k])]


def _groups(table: dict[str, object], skipped: list[str]) -> list[str]:
    """PEP 735 dependency groups: the test (else dev) groups, `{include-group = ...}` followed."""

    def members(name: str, seen: tuple[str, ...]) -> list[str]:
        if name in seen:
            skipped.append(f"dependency group {name!r} includes itself ({' -> '.join((*seen, name))})")
            return []
        entries = table.get(name)
        lines: list[str] = []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, str):
                lines.append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
                lines += members(entry["include-group"], (*seen, name))
        return lines

    keys = [k for k in TEST_EXTRAS if k in table] or [k for k in DEV_EXTRAS if k in table]
    return [line for k in keys for line in members(k, ())]


def _pyproject(repo: Path, skipped: list[str]) -> tuple[list[str], str]:
    data = _toml(repo / "pyproject.toml")
    project = data.get("project")
    lines: list[str] = []
    if isinstance(project, dict):
        lines += _strings(project.get("dependencies"))
        optional = project.get("optional-dependencies")
        if isinstance(optional, dict):
            lines += _extras(optional)
    groups = data.get("dependency-groups")
    if isinstance(groups, dict):
        lines += _groups(groups, skipped)
    return lines, "pyproject.toml"


def _setup_cfg(repo: Path, skipped: list[str]) -> tuple[list[str], str]:
    text = _text(repo / "setup.cfg")
    if not text:
        return [], ""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        skipped.append(f"setup.cfg: {str(exc)[:200]}")
        return [], ""
    lines = _cfg_lines(parser.get("options", "install_requires", fallback=""))
    if parser.has_section("options.extras_require"):
        extras = {k: _cfg_lines(v) for k, v in parser.items("options.extras_require")}
        lines += _extras(dict(extras))
    return lines, "setup.cfg"


def _cfg_lines(value: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in value.splitlines() if line.split("#", 1)[0].strip()]


def _setup_py(repo: Path, skipped: list[str]) -> tuple[list[str], str]:
    text = _text(repo / "setup.py")
    if not text:
        return [], ""
    try:
        tree = pysource.parse(text)
    except SyntaxError as exc:
        skipped.append(f"setup.py: not parseable on this Python ({exc.msg})")
        return [], ""
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    lines: list[str] = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) == "setup"):
            continue
        for keyword in call.keywords:
            value = names.get(keyword.value.id, keyword.value) if isinstance(keyword.value, ast.Name) else keyword.value
            literal = _literal(value)
            if keyword.arg in ("install_requires", "tests_require"):
                lines += _strings(literal)
            elif keyword.arg == "extras_require" and isinstance(literal, dict):
                lines += _extras({str(k): v for k, v in literal.items()})
    return lines, "setup.py"


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def _requirement_files(repo: Path, skipped: list[str]) -> tuple[list[str], str]:
    lines: list[str] = []
    used: list[str] = []
    for name in REQUIREMENT_FILES:
        text = _text(repo / name)
        if not text:
            continue
        used.append(name)
        for raw in text.splitlines():
            line = raw.split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("-") or "://" in line or line.startswith((".", "/")):
                skipped.append(f"{name}: {line[:120]!r} is not a registry requirement")
                continue
            try:
                Requirement(line)
            except InvalidRequirement:
                skipped.append(f"{name}: {line[:120]!r} is not a requirement")
                continue
            lines.append(line)
    return lines, ", ".join(used)
