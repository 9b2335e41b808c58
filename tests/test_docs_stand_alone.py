"""The project stands alone: no file cites a document that a clone of the repository lacks.

The design document, the guide the requirements came from and the folder shared beside the
checkout live outside the repository, so a reader of a clone who meets a citation of one has
nowhere to look. A citation names a file in docs/ (one that exists), or the comment states the
fact itself. (This file alone spells those names: its patterns and planted samples must.)
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()
TEXT_SUFFIXES = frozenset({".py", ".md", ".html", ".js", ".yaml", ".yml", ".toml", ".sh"})
TEXT_NAMES = frozenset({"Makefile"})
SKIPPED_PREFIXES = (".venv/", "var/", "tests/fixtures/")
SKIPPED_PARTS = frozenset({"repo_snapshot"})  # the demo tasks' repositories are their own projects

# Documents outside the repository: the design document (by file name, or its name and a quoted
# section), the requirements guide's numbered sections, the shared folder beside the checkout.
OUTSIDE = re.compile(r"DESIGN\.md|\bDESIGN [\"'`]|(?i:\bseed\s*§)|\.\./shared\b")
# A docs page named by its path from the repository root (not docs/ inside some other tree).
DOCS_PAGE = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)\b")


def project_files() -> list[str]:
    """Tracked text files plus untracked ones git does not ignore, relative to the root."""
    listed: set[str] = set()
    for extra in ([], ["--others", "--exclude-standard"]):
        try:
            out = subprocess.run(
                ["git", "-C", str(ROOT), "ls-files", "-z", *extra],
                capture_output=True,
                check=True,
                timeout=60,
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            # Not a git checkout (an unpacked archive): every file under the root, build output aside.
            listed = {path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*") if ".git" not in path.parts}
            break
        listed.update(name for name in out.decode().split("\0") if name)
    return sorted(
        name
        for name in listed
        if (Path(name).suffix in TEXT_SUFFIXES or Path(name).name in TEXT_NAMES)
        and not name.startswith(SKIPPED_PREFIXES)
        and not SKIPPED_PARTS & set(Path(name).parts)
        and name != THIS
        and (ROOT / name).is_file()
    )


def dead_citations(text: str) -> list[str]:
    """Every citation in `text` of a document the repository does not hold, as 'line N: ...'."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        outside = [m.group(0) for m in OUTSIDE.finditer(line)]
        missing = [f"docs/{m.group(1)}" for m in DOCS_PAGE.finditer(line) if not (ROOT / "docs" / m.group(1)).is_file()]
        found += [f"line {number}: {cited}" for cited in (*outside, *missing)]
    return found


def citations_by_file() -> dict[str, list[str]]:
    out = {}
    for name in project_files():
        dead = dead_citations((ROOT / name).read_text(encoding="utf-8", errors="replace"))
        if dead:
            out[name] = dead
    return out


def test_the_check_catches_each_kind_of_outside_citation() -> None:
    planted = "\n".join(
        [
            '# see DESIGN.md "Rewards"',
            '"""The admission rules (DESIGN "Rewards")."""',
            "<h2>Isolation (seed §7.1)</h2>",
            '"""Seed §8\'s three figures."""',
            "// copied from ../shared/seed/guide.txt",
            "(docs/no-such-page.md)",
        ]
    )
    assert [hit.split(":")[0] for hit in dead_citations(planted)] == [f"line {n}" for n in range(1, 7)]


def test_citations_of_the_repository_docs_and_other_trees_pass() -> None:
    text = "See docs/formats.md, [the API](docs/api.md), a repo's own repo_snapshot/docs/usage.md, by design."
    assert dead_citations(text) == []


def test_no_project_file_cites_a_document_outside_the_repository() -> None:
    dead = citations_by_file()
    assert not dead, "citations of documents a clone does not have:\n" + "\n".join(
        f"{name} {hit}" for name, hits in sorted(dead.items()) for hit in hits
    )
