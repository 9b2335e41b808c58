"""The real-repository corpus (tests/fixtures/real-repos/): what `make bench BENCH_ARGS=real_history`
builds from. Every bundle there must be usable: listed in the README with a permissive licence,
clonable, with its licence file at HEAD and enough candidate commits to build tasks from.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from bench.real_history import CORPUS_DIR, CorpusRepo, corpus
from tasks.builders import git_history

LISTED = corpus()
LICENCE_FILE = ("LICENSE", "LICENCE", "COPYING")  # with or without a suffix (LICENSE.txt, LICENSE.md)
# What each licence's text says that the others' do not: the table's licence is the file's.
LICENCE_WORDS = {
    "MIT": ("Permission is hereby granted, free of charge",),
    "BSD-3-Clause": ("Redistribution and use in source and binary forms", "endorse or promote"),
    "BSD-2-Clause": ("Redistribution and use in source and binary forms",),
    "Apache-2.0": ("Apache License", "Version 2.0"),
    "ISC": ("Permission to use, copy, modify, and/or distribute",),
}
MIN_CANDIDATES = 5


def test_every_bundle_is_listed_once_with_a_permissive_licence() -> None:
    bundles = sorted(p.name for p in CORPUS_DIR.glob("*.bundle"))
    names = [repo.bundle.name for repo in LISTED]
    assert sorted(names) == bundles and len(set(names)) == len(names)
    assert len(LISTED) >= 13
    for repo in LISTED:
        assert repo.licence in settings.CRUCIBLE_LICENSE_ALLOWLIST, repo
        assert repo.repo.count("/") == 1, repo


@pytest.mark.parametrize("repo", LISTED, ids=[r.name for r in LISTED])
def test_each_bundle_clones_with_its_licence_and_candidates(repo: CorpusRepo, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    # Without a checkout: the licence and the candidates are read from the history itself.
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo.bundle), str(clone)], check=True, timeout=60)
    files = _git(clone, "ls-tree", "--name-only", "HEAD").split()
    licence = [f for f in files if f.upper().split(".")[0] in LICENCE_FILE]
    assert licence, files
    text = " ".join(_git(clone, "show", f"HEAD:{licence[0]}").split())
    assert all(words in text for words in LICENCE_WORDS[repo.licence]), (repo.licence, text[:200])
    assert len(git_history.candidates(clone)) >= MIN_CANDIDATES


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True, text=True).stdout
