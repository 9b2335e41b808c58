"""Mutants of a file or a whole repository: runs the collector and keeps what splices and parses.

Owns the order mutants come out in (source order, ties broken by operator rank) and the
rule that the first operator producing a given text keeps the mutant.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

import libcst as cst
from libcst.metadata import MetadataWrapper

from tasks.builders.mutation.model import OPERATOR_RANK, Mutant, resolve_operators
from tasks.builders.mutation.nodes import is_reexport_init
from tasks.builders.mutation.sites import Site, SiteCollector
from tasks.builders.mutation.splice import Splicer, SyntaxChecker

logger = logging.getLogger(__name__)


def mutants_for_source(source: str, path: str, operators: Iterable[str] | None = None) -> list[Mutant]:
    """Every single-node mutant of ``source``, in source order, without duplicates.

    Raises ``libcst.ParserSyntaxError`` when ``source`` does not parse.
    """
    enabled = resolve_operators(operators)
    module = cst.parse_module(source)
    if is_reexport_init(path, module):
        return []
    wrapper = MetadataWrapper(module)
    collector = SiteCollector(wrapper.module, enabled)
    wrapper.visit(collector)
    splicer = Splicer(wrapper)

    checker = SyntaxChecker(splicer, path)
    seen = {source}
    mutants: list[Mutant] = []
    for site in sorted(collector.sites, key=_site_key):
        mutated = splicer.apply(site)
        if mutated is None or mutated in seen or not checker.accepts(site, mutated):
            continue
        seen.add(mutated)
        mutants.append(
            Mutant(
                path=path,
                operator=site.operator.value,
                description=f"{site.summary} {site.where} (line {site.line})",
                line=site.line,
                function=site.function,
                original=source,
                mutated=mutated,
            )
        )
    return mutants


def default_include(path: str) -> bool:
    """Whether a repo-relative path is library code worth mutating (not tests or packaging)."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if any(part in ("tests", "test") for part in parts[:-1]):
        return False
    if name.startswith("test_") or name.endswith("_test.py"):
        return False
    return name not in ("conftest.py", "setup.py")


def mutants_for_repo(
    root: Path,
    include: Callable[[str], bool] | None = None,
    operators: Iterable[str] | None = None,
) -> list[Mutant]:
    """Mutants of every included ``*.py`` file under ``root``, files in path order.

    ``include`` receives the repo-relative POSIX path; it defaults to
    :func:`default_include`. Files that are not UTF-8 or do not parse are skipped.
    """
    enabled = resolve_operators(operators)
    keep = include or default_include
    mutants: list[Mutant] = []
    for relative in _python_files(root):
        if not keep(relative):
            continue
        try:
            # Bytes, not read_text: universal newlines would turn a CRLF file
            # into a whole-file diff once the mutant is written back.
            source = (root / relative).read_bytes().decode("utf-8")
            mutants.extend(mutants_for_source(source, relative, enabled))
        except (OSError, UnicodeDecodeError, cst.ParserSyntaxError) as error:
            # Python 2 files, other encodings and deliberately broken fixtures turn up in
            # real repos; one of them must not cost the rest of the repo its mutants.
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            logger.info("mutation: skipped %s (%s: %s)", relative, type(error).__name__, reason)
            continue
    return mutants


def _site_key(site: Site) -> tuple[int, int, int, int]:
    return (site.line, site.column, OPERATOR_RANK[site.operator], site.order)


def _python_files(root: Path) -> list[str]:
    """Repo-relative POSIX paths of ``*.py`` files, sorted, skipping VCS, caches and virtualenvs."""
    found: list[str] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not name.startswith(".")
            and name not in ("__pycache__", "node_modules", "site-packages")
            and not (Path(directory) / name / "pyvenv.cfg").exists()
        )
        relative_dir = Path(directory).relative_to(root)
        found.extend((relative_dir / name).as_posix() for name in files if name.endswith(".py"))
    return sorted(found)
