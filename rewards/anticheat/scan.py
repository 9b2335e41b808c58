"""Entry points: scan the changed files of a workspace, drop what the base version already had,
and scan a trajectory's shell commands.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from pathlib import Path

from patches import pysource
from rewards.anticheat.detectors import Analysis
from rewards.anticheat.files import file_size, read_bounded
from rewards.anticheat.flags import Finding, Flag, SourceScan
from rewards.anticheat.patterns import DYNAMIC, GIT_HISTORY, HISTORY, MAX_SOURCE_BYTES

logger = logging.getLogger(__name__)


def _analyse(data: bytes, rel: str, root: Path | None) -> list[Finding]:
    # Bytes, so that a coding cookie is honoured exactly as the interpreter honours it.
    tree = pysource.parse(data, filename=rel)
    source = data.decode("utf-8", "replace")
    if len(data) >= 3 and data[:3] == b"\xef\xbb\xbf":
        source = source[1:]
    return Analysis(tree, source, rel, root).run()


def _findings(root: Path, rel: str) -> tuple[list[Finding] | None, str]:
    data = read_bounded(root, rel, MAX_SOURCE_BYTES)
    if data is None:
        return None, "not a regular file of at most 1 MB"
    try:
        return _analyse(data, rel, root), ""
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:200]


def scan_sources(workspace: Path, paths: Iterable[str], base: Path | None = None) -> SourceScan:
    """Static evidence over the changed Python files as they stand after the patch.

    `base` is a copy of the task's repository before the patch: findings the base version
    of a file already had are the repository's own and are left out.
    """
    scan = SourceScan()
    for rel in paths:
        if not rel.endswith(".py"):
            continue
        found, why = _findings(workspace, rel)
        if found is None:
            size = file_size(workspace / rel)
            base_size = file_size(base / rel) if base is not None else None
            if size is not None and size > MAX_SOURCE_BYTES and not (base_size and base_size > MAX_SOURCE_BYTES):
                # Too big to read is not too big to import: padding must not hide code.
                scan.flags.append(Flag(DYNAMIC, f"{size} bytes of Python, too large to check statically", rel))
            else:
                scan.unparsed[rel] = why
                logger.info("static scan skipped %s: %s", rel, why)
            continue
        already = _already_there(base, workspace, rel) if base is not None else {}
        seen: set[Finding] = set()
        for finding in sorted(found, key=lambda f: f.line):
            if finding in seen:
                continue
            seen.add(finding)
            if (finding.detector, finding.why, finding.snippet) in already.get(finding.line, ()):
                continue
            evidence = f"{finding.why}: {finding.snippet}" if finding.snippet else finding.why
            scan.flags.append(Flag(finding.detector, evidence, rel, finding.line or None))
    return scan


def _already_there(base: Path, workspace: Path, rel: str) -> dict[int, set[tuple[str, str, str]]]:
    """Findings the base version had on lines the patch left alone, by their line after the patch."""
    before, _ = _findings(base, rel)
    old, new = read_bounded(base, rel, MAX_SOURCE_BYTES), read_bounded(workspace, rel, MAX_SOURCE_BYTES)
    if not before or old is None or new is None:
        return {}
    by_old_line: dict[int, set[tuple[str, str, str]]] = {}
    for finding in before:
        by_old_line.setdefault(finding.line, set()).add((finding.detector, finding.why, finding.snippet))
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines())
    out: dict[int, set[tuple[str, str, str]]] = {}
    for tag, old_start, old_end, new_start, _ in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(old_end - old_start):
                if old_start + offset + 1 in by_old_line:
                    out[new_start + offset + 1] = by_old_line[old_start + offset + 1]
    return out


def scan_commands(commands: Iterable[tuple[int, str]]) -> list[Flag]:
    """(step, command) pairs from a trajectory: mining git history for the answer."""
    return [
        Flag(HISTORY, f"looks at repository history: {cmd.strip()[:200]}", step=step)
        for step, cmd in commands
        if GIT_HISTORY.search(cmd)
    ]
