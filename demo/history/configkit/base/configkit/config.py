"""Parse ``key = value`` configuration text with ``[sections]`` and comments."""

from __future__ import annotations

from typing import Any

from configkit.values import parse_value

COMMENT_PREFIXES = ("#", ";")
_MISSING = object()


class ConfigError(ValueError):
    """Malformed configuration text; ``lineno`` is 1-based."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def _strip_comment(line: str) -> str:
    """Drop a trailing ``# comment``."""
    index = line.find(" #")
    return line if index == -1 else line[:index]


def parse_config(text: str) -> dict[str, Any]:
    """Parse configuration text into a dict.

    Keys before the first ``[section]`` header are top-level; later keys go
    into a nested dict named after their section. Lines starting with ``#``
    or ``;`` are comments. Values are converted by :func:`parse_value`.
    """
    lines = text.splitlines()
    if lines[0].startswith("\ufeff"):
        # Editors on Windows like to save files with a byte-order mark.
        lines[0] = lines[0][1:]

    result: dict[str, Any] = {}
    current = result
    for lineno, raw in enumerate(lines):
        line = _strip_comment(raw).strip()
        if not line or line.startswith(COMMENT_PREFIXES):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise ConfigError(f"unterminated section header {line!r}", lineno)
            name = line[1:-1].strip()
            if not name:
                raise ConfigError("empty section name", lineno)
            current = result.setdefault(name, {})
            if not isinstance(current, dict):
                raise ConfigError(f"section {name!r} clashes with a key", lineno)
            continue
        if "=" not in line:
            raise ConfigError(f"expected 'key = value', got {line!r}", lineno)
        key, value = line.split("=")
        key = key.strip()
        if not key:
            raise ConfigError("missing key before '='", lineno)
        current[key] = parse_value(value)
    return result


def merge_configs(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``override`` laid over ``base``; sections merge key by key.

    Neither argument is modified.
    """
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key].update(value)
        else:
            merged[key] = value
    return merged


def get_path(config: dict[str, Any], path: str, default: Any = _MISSING) -> Any:
    """Look up a dotted path such as ``"server.port"``.

    A missing path returns ``default`` or, without one, raises KeyError.
    """
    node: Any = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
        if not node:
            if default is _MISSING:
                raise KeyError(path)
            return default
    return node


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_format_value(item) for item in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def dump_config(config: dict[str, Any]) -> str:
    """Write a config back as text that :func:`parse_config` reads again."""
    lines = [f"{key} = {_format_value(value)}" for key, value in config.items() if not isinstance(value, dict)]
    for name, section in config.items():
        if not isinstance(section, dict):
            continue
        if lines:
            lines.append("")
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {_format_value(value)}" for key, value in section.items())
    return "\n".join(lines) + "\n" if lines else ""
