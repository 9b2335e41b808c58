"""core.artefacts: the staging, member checks and packing every shared artefact uses."""

from __future__ import annotations

import hashlib
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest

from core.artefacts import ArtefactError, checked_members, drop, pack, staged


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_of_two_fetches_of_one_artefact_one_rename_wins_and_both_see_it_whole(tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "abc"
    started = threading.Barrier(2)
    results: list[bool] = []

    def fill(out: Path) -> None:
        out.mkdir()
        started.wait()  # both are half-way through their download at once
        (out / "weights.bin").write_bytes(b"w" * 1000)
        time.sleep(0.05)

    threads = [threading.Thread(target=lambda: results.append(staged(dest, fill, ready=Path.is_dir))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert (dest / "weights.bin").read_bytes() == b"w" * 1000
    assert _leftovers(dest.parent) == []  # neither staging folder stays


def test_a_fill_that_does_not_verify_leaves_nothing_behind(tmp_path: Path) -> None:
    dest = tmp_path / "abc"

    def fill(out: Path) -> None:
        out.mkdir()
        (out / "half").write_bytes(b"x")
        raise ArtefactError("abc: hashes to something else; refused")

    with pytest.raises(ArtefactError, match="refused"):
        staged(dest, fill)
    assert not dest.exists() and _leftovers(tmp_path) == []


def test_a_rename_that_fails_for_another_reason_is_not_taken_for_a_lost_race(tmp_path: Path) -> None:
    dest = tmp_path / "abc"
    dest.mkdir()
    (dest / "partial").write_text("someone else's half copy")
    with pytest.raises(OSError):
        staged(dest, lambda out: out.mkdir(), ready=lambda path: (path / "complete").exists())


def test_the_same_files_always_pack_to_the_same_bytes(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "a.py").write_text("x = 1\n")
    digests = []
    for stamp in (1_000_000, 2_000_000):
        os.utime(tree / "pkg" / "a.py", (stamp, stamp))
        archive = tmp_path / f"{stamp}.tar"
        pack(archive, [("pkg", tree / "pkg"), ("pkg/a.py", tree / "pkg" / "a.py")])
        digests.append(hashlib.sha256(archive.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    with tarfile.open(tmp_path / "1000000.tar") as tar:
        assert [(m.name, m.uid, m.mtime) for m in tar.getmembers()] == [("pkg", 0, 0), ("pkg/a.py", 0, 0)]


def test_a_dropped_artefact_is_gone_at_once_under_its_name(tmp_path: Path) -> None:
    doomed = tmp_path / "abc"
    doomed.mkdir()
    (doomed / "f").write_text("x")
    drop(doomed)
    drop(doomed)  # twice is nothing
    assert not doomed.exists() and _leftovers(tmp_path) == []


def test_members_outside_the_root_or_of_other_kinds_are_refused(tmp_path: Path) -> None:
    for name, kind, link, message in [
        ("../x", tarfile.REGTYPE, "", "'../x', outside the archive"),
        ("fifo", tarfile.FIFOTYPE, "", "which is not a file or folder"),
        ("ok", tarfile.SYMTYPE, "anywhere", "which is not a file or folder"),  # no link check: no links
    ]:
        archive = tmp_path / "one.tar"
        with tarfile.open(archive, "w") as tar:
            member = tarfile.TarInfo(name)
            member.type, member.linkname = kind, link
            tar.addfile(member)
        with tarfile.open(archive) as tar, pytest.raises(ArtefactError, match=message):
            checked_members(tar, "thing 1")
