"""The Go and JavaScript/TypeScript real-repository corpora (tests/fixtures/real-repos-go/ and
tests/fixtures/real-repos-js/): recent history of public, permissively licensed repositories, for
building tasks in those languages. Every bundle there must be listed in its README's table with a
permissive licence, clone, have its licence file at the bundle HEAD the table gives, and hold at
least MIN_CANDIDATES commits that change both code and tests.

A candidate here is a non-merge, non-root commit that changes a test file and a non-test source
file, by file name alone: Go tests are `*_test.go` and code any other `.go` file outside
`testdata/`; JavaScript/TypeScript tests are `*.test.*`, `*.spec.*` and anything under a
`__tests__/` directory, and code any other `.js`/`.ts` (and `.mjs`, `.cjs`, `.jsx`, `.tsx`, `.mts`,
`.cts`) file.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from django.conf import settings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CORPORA = {"go": FIXTURES / "real-repos-go", "js": FIXTURES / "real-repos-js"}
MIN_CANDIDATES = 20
MIN_BUNDLES = 3
LICENCE_FILE = ("LICENSE", "LICENCE", "COPYING")  # with or without a suffix (LICENSE.txt, LICENSE.md)
# What each licence's text says that the others' do not: the table's licence is the file's.
LICENCE_WORDS = {
    "MIT": ("Permission is hereby granted, free of charge",),
    "BSD-3-Clause": ("Redistribution and use in source and binary forms", "endorse or promote"),
    "BSD-2-Clause": ("Redistribution and use in source and binary forms",),
    "Apache-2.0": ("Apache License", "Version 2.0"),
    "ISC": ("Permission to use, copy, modify, and/or distribute",),
}
JS_SOURCE = (".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", ".mts", ".cts")
_JS_TEST_NAME = re.compile(r"\.(test|spec)\.[A-Za-z0-9]+$")
# A table row: | `NAME.bundle` | <URL> | licence | `licence file` | upstream HEAD | `bundle HEAD` | ...
_ROW = re.compile(r"^\|\s*`(?P<bundle>[\w.-]+\.bundle)`\s*\|(?P<rest>.*)\|\s*$")


@dataclass(frozen=True)
class Listed:
    lang: str
    bundle: Path
    upstream: str
    licence: str
    licence_file: str
    head: str

    @property
    def name(self) -> str:
        return f"{self.lang}/{self.bundle.stem}"


def listed(lang: str) -> list[Listed]:
    """The README's table rows of one corpus, in order."""
    rows = []
    for line in (CORPORA[lang] / "README.md").read_text().splitlines():
        match = _ROW.match(line.strip())
        if not match:
            continue
        cells = [cell.strip() for cell in match["rest"].split("|")]
        upstream, licence, licence_file, head = cells[0].strip("<>"), cells[1], cells[2].strip("`"), cells[4]
        rows.append(Listed(lang, CORPORA[lang] / match["bundle"], upstream, licence, licence_file, head.strip("`")))
    return rows


LISTED = listed("go") + listed("js")


def is_test(lang: str, path: str) -> bool:
    if lang == "go":
        return path.endswith("_test.go")
    return "__tests__" in PurePosixPath(path).parts[:-1] or bool(_JS_TEST_NAME.search(PurePosixPath(path).name))


def is_code(lang: str, path: str) -> bool:
    if is_test(lang, path):
        return False
    if lang == "go":
        return path.endswith(".go") and "testdata" not in PurePosixPath(path).parts[:-1]
    return path.endswith(JS_SOURCE)


def candidates(lang: str, clone: Path) -> list[str]:
    """The non-merge, non-root commits (newest first) that change both code and tests, by file name."""
    log = _git(clone, "log", "--no-merges", "--no-renames", "--format=%x00%H %P", "--name-only", "HEAD")
    found = []
    for record in log.split("\x00")[1:]:
        header, _, names = record.partition("\n")
        ids = header.split()
        if len(ids) != 2:
            continue  # a root: every file is added, nothing is a change
        files = [name for name in names.splitlines() if name]
        if any(is_test(lang, f) for f in files) and any(is_code(lang, f) for f in files):
            found.append(ids[0])
    return found


@pytest.mark.parametrize("lang", sorted(CORPORA))
def test_every_bundle_is_listed_once_with_a_permissive_licence(lang: str) -> None:
    rows = [repo for repo in LISTED if repo.lang == lang]
    bundles = sorted(p.name for p in CORPORA[lang].glob("*.bundle"))
    names = [repo.bundle.name for repo in rows]
    assert sorted(names) == bundles and len(set(names)) == len(names)
    assert len(rows) >= MIN_BUNDLES
    for repo in rows:
        assert repo.licence in settings.CRUCIBLE_LICENSE_ALLOWLIST and repo.licence in LICENCE_WORDS, repo
        assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repo.upstream), repo
        assert re.fullmatch(r"[0-9a-f]{12}", repo.head), repo


@pytest.mark.parametrize("repo", LISTED, ids=[r.name for r in LISTED])
def test_each_bundle_clones_with_its_licence_and_candidates(repo: Listed, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    # Without a checkout: the licence, the manifests and the candidates are read from the history.
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo.bundle), str(clone)], check=True, timeout=60)
    assert _git(clone, "rev-parse", "HEAD").startswith(repo.head)
    files = _git(clone, "ls-tree", "--name-only", "HEAD").split()
    assert repo.licence_file in files and repo.licence_file.upper().split(".")[0] in LICENCE_FILE, files
    text = " ".join(_git(clone, "show", f"HEAD:{repo.licence_file}").split())
    assert all(words in text for words in LICENCE_WORDS[repo.licence]), (repo.licence, text[:200])
    if repo.lang == "go":
        # Usable offline: a standard-library-only module (or one with its dependencies vendored).
        go_mod = _git(clone, "show", "HEAD:go.mod")
        assert not re.search(r"^require\b", go_mod, re.MULTILINE) or "vendor" in files, go_mod
    else:
        # npm's lock (what sandbox.node_env installs from), with a runner the readers know in it.
        lock = json.loads(_git(clone, "show", "HEAD:package-lock.json"))
        assert lock["lockfileVersion"] in (2, 3)
        assert {"node_modules/vitest", "node_modules/jest"} & set(lock["packages"]), repo
    assert len(candidates(repo.lang, clone)) >= MIN_CANDIDATES


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True, text=True).stdout
