"""A repository's own pytest settings, read as data and carried into the harness's ini.

The hermetic run never lets the workspace's pytest.ini, pyproject.toml, tox.ini or setup.cfg
configure pytest (sandbox/hermetic.py): the agent could rewrite them. But a suite that keeps its
fixture folders out with `norecursedirs`, or names its test files `check_*.py`, fails collection
without its settings. So the settings are read from the repository at task-build time (from the
base commit, never from a workspace), kept to the keys that say what is collected and how it is
judged, checked, and written by the harness into its own ini. Everything else is reported as
ignored. Nothing here runs the repository's code.
"""

from __future__ import annotations

import configparser
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

# The ini keys carried over; each is `args` (shell words), `linelist` (one per line) or `bool` in
# pytest's terms. Anything else (plugins' keys, log settings, `addopts`' other options) is ignored
# and named in the build report; `pythonpath` becomes the environment's import paths.
INI_KEYS = {
    "testpaths": "args",
    "norecursedirs": "args",
    "python_files": "args",
    "python_classes": "args",
    "python_functions": "args",
    "doctest_optionflags": "args",
    "markers": "linelist",
    "filterwarnings": "linelist",
    "xfail_strict": "bool",
}
# addopts options carried over (with their value): what is collected and how strictly.
ARG_OPTIONS = ("--ignore", "--ignore-glob", "--deselect", "--doctest-glob", "--import-mode")
ARG_FLAGS = ("--doctest-modules", "--strict-markers", "--strict-config")
IMPORT_MODES = ("prepend", "append", "importlib")
PATH_OPTIONS = ("testpaths", "--ignore", "--ignore-glob", "--deselect", "--doctest-glob")
MAX_VALUES = 64
MAX_VALUE_CHARS = 300
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f]*")
MAX_FILE_BYTES = 256 * 1024


class PytestSettingsError(ValueError):
    """Settings that cannot be carried into the harness's ini safely."""


@dataclass(frozen=True)
class PytestSettings:
    """The carried ini keys (key, values) and addopts arguments, checked on creation."""

    ini: tuple[tuple[str, tuple[str, ...]], ...] = ()
    args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check(self)

    def __bool__(self) -> bool:
        return bool(self.ini or self.args)

    def to_json(self) -> dict[str, Any]:
        return {"ini": {key: list(values) for key, values in self.ini}, "args": list(self.args)}

    @classmethod
    def from_json(cls, data: object) -> PytestSettings:
        if not isinstance(data, dict) or set(data) - {"ini", "args"}:
            raise PytestSettingsError("environment.pytest: must be an object with `ini` and `args`")
        ini, args = data.get("ini", {}), data.get("args", [])
        if not isinstance(ini, dict) or not all(_strings(v) for v in ini.values()) or not _strings(args):
            raise PytestSettingsError("environment.pytest: `ini` maps keys to lists of strings, `args` is a list")
        return cls(ini=tuple(sorted((str(k), tuple(v)) for k, v in ini.items())), args=tuple(args))

    def ini_text(self) -> str:
        """The harness ini's lines for these settings (values one per continuation line)."""
        lines = []
        for key, values in self.ini:
            lines.append(f"{key} =")
            lines += [f"    {shlex.quote(v) if INI_KEYS[key] == 'args' else v}" for v in values]
        return "\n".join(lines) + ("\n" if lines else "")


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check(settings: PytestSettings) -> None:
    """Refuse what could reach further than its key: a newline (another ini key), a path out of
    the repository, an option that loads code (`-p`), an unknown key."""
    for key, values in settings.ini:
        if key not in INI_KEYS:
            raise PytestSettingsError(f"environment.pytest.ini: {key!r} is not a setting the harness carries")
        _values(f"environment.pytest.ini.{key}", values, paths=key in PATH_OPTIONS)
        if INI_KEYS[key] == "bool" and values not in (("true",), ("false",)):
            raise PytestSettingsError(f"environment.pytest.ini.{key}: must be true or false")
    _values("environment.pytest.args", settings.args, paths=False)
    for arg in settings.args:
        name, _, value = arg.partition("=")
        if arg in ARG_FLAGS:
            continue
        if name not in ARG_OPTIONS or not value:
            raise PytestSettingsError(f"environment.pytest.args: {arg[:80]!r} is not an option the harness carries")
        if name == "--import-mode" and value not in IMPORT_MODES:
            modes = ", ".join(IMPORT_MODES)
            raise PytestSettingsError(f"environment.pytest.args: --import-mode must be one of {modes}")
        _path(f"environment.pytest.args {name}", value.split("::", 1)[0])


def _values(where: str, values: tuple[str, ...], *, paths: bool) -> None:
    if len(values) > MAX_VALUES:
        raise PytestSettingsError(f"{where}: at most {MAX_VALUES} values")
    for value in values:
        if not value.strip() or len(value) > MAX_VALUE_CHARS or not _PRINTABLE.fullmatch(value):
            raise PytestSettingsError(f"{where}: {value[:60]!r} must be 1 to {MAX_VALUE_CHARS} printable characters")
        if paths:
            _path(where, value)


def _path(where: str, value: str) -> None:
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or "\\" in value:
        raise PytestSettingsError(f"{where}: {value[:60]!r} must be a relative path inside the repository")


def read_settings(repo: Path) -> tuple[PytestSettings, list[str], str]:
    """(the settings carried, what was ignored, the file they came from) for `repo`'s pytest
    configuration, found as pytest finds it: the first of pytest.toml, .pytest.toml, pytest.ini,
    .pytest.ini, pyproject.toml ([tool.pytest.ini_options], or pytest 9's [tool.pytest]), tox.ini
    ([pytest]), setup.cfg ([tool:pytest])."""
    found = _find_table(repo)
    if found is None:
        return PytestSettings(), [], ""
    table, name = found
    settings, ignored = _translate(table)
    return settings, [f"{name}: {item}" for item in ignored], name


def read_pythonpath(repo: Path) -> tuple[str, ...]:
    """The `pythonpath` setting's directories (relative to the repository), for the environment's
    import paths: the harness puts them on sys.path only after its plugins, never through its ini."""
    found = _find_table(repo)
    if found is None or "pythonpath" not in found[0]:
        return ()
    kept = []
    for entry in _words("args", found[0]["pythonpath"]):
        try:
            _path("pythonpath", entry)
        except PytestSettingsError:
            continue
        if entry not in kept and _PRINTABLE.fullmatch(entry) and ":" not in entry:
            kept.append(entry)
    return tuple(kept)


def _find_table(repo: Path) -> tuple[dict[str, object], str] | None:
    for name, reader in (
        ("pytest.toml", _pytest_toml),
        (".pytest.toml", _pytest_toml),
        ("pytest.ini", _ini("pytest")),
        (".pytest.ini", _ini("pytest")),
        ("pyproject.toml", _pyproject),
        ("tox.ini", _ini("pytest")),
        ("setup.cfg", _ini("tool:pytest")),
    ):
        text = _text(repo / name)
        if text is None:
            continue
        table = reader(text)
        if table is not None:
            return table, name
    return None


def _text(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(errors="replace")
    except OSError:
        return None


def _ini(section: str) -> Any:
    def read(text: str) -> dict[str, object] | None:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            return None
        return dict(parser.items(section)) if parser.has_section(section) else None

    return read


def _pyproject(text: str) -> dict[str, object] | None:
    """[tool.pytest.ini_options], else pytest 9's native [tool.pytest] table."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    tool = data.get("tool", {})
    pytest = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest, dict):
        return None
    table = pytest.get("ini_options", pytest)
    return table if isinstance(table, dict) and table else None


def _pytest_toml(text: str) -> dict[str, object] | None:
    """pytest.toml / .pytest.toml (pytest 9): a [pytest] table."""
    try:
        table = tomllib.loads(text).get("pytest")
    except tomllib.TOMLDecodeError:
        return None
    return table if isinstance(table, dict) else None


def _words(kind: str, value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    text = str(value)
    if kind == "linelist":
        return [line.strip() for line in text.splitlines() if line.strip()]
    if kind == "bool":
        return [text.strip().lower()]
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _translate(table: dict[str, object]) -> tuple[PytestSettings, list[str]]:
    ini: list[tuple[str, tuple[str, ...]]] = []
    args: list[str] = []
    ignored: list[str] = []
    for key, value in table.items():
        if key == "pythonpath":
            continue  # carried as the environment's import paths (read_pythonpath)
        if key == "addopts":
            args += _addopts(_words("args", value), ignored)
        elif key in INI_KEYS:
            values = tuple(_words(INI_KEYS[key], value))
            if INI_KEYS[key] == "bool" and values not in (("true",), ("false",)):
                values = ("true",) if values and values[0] in ("1", "yes", "on") else ("false",)
            if values:
                ini.append((key, values))
        else:
            ignored.append(f"{key} (not a setting the harness carries)")
    kept_ini, kept_args = [], []
    for key, values in ini:  # one bad value costs its key, not the whole configuration
        try:
            PytestSettings(ini=((key, values),))
            kept_ini.append((key, values))
        except PytestSettingsError as exc:
            ignored.append(str(exc))
    for arg in args:
        try:
            PytestSettings(args=(arg,))
            kept_args.append(arg)
        except PytestSettingsError as exc:
            ignored.append(str(exc))
    return PytestSettings(ini=tuple(sorted(kept_ini)), args=tuple(kept_args)), ignored


def _addopts(words: list[str], ignored: list[str]) -> list[str]:
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name = word.partition("=")[0]
        if word in ARG_FLAGS:
            kept.append(word)
        elif name in ARG_OPTIONS and "=" in word:
            kept.append(word)
        elif word in ARG_OPTIONS and i + 1 < len(words):
            kept.append(f"{word}={words[i + 1]}")
            i += 1
        else:
            ignored.append(f"addopts {word!r} (not an option the harness carries)")
        i += 1
    return kept
