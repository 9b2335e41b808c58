"""Admission of GIT binary patches: literals and deltas decode, text sent as binary is judged as
text, true binary content is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patches import BinaryHunk, PatchError, parse
from patches.binary import apply_delta, inflate, literal_hunk, new_content
from rewards.admission import admit
from tests.rewards.corpus import FORCE_PASS_CONFTEST
from tests.rewards.test_admission import ALL_RULES, BASE_FILES, binary_patch, unchecked_pyc


def test_binary_literals_round_trip_through_the_decoder() -> None:
    for data in (b"", b"x", bytes(range(256)) * 40, "Größe → ok\n".encode()):
        hunk = literal_hunk(data)
        assert inflate(hunk) == data and hunk.size == len(data)


def test_a_binary_patch_built_here_is_one_git_applies(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    payload = bytes(range(256)) * 3
    subprocess.run(
        ["git", "apply", "-"], cwd=tmp_path, input=binary_patch("img.bin", None, payload).encode(), check=True
    )
    assert (tmp_path / "img.bin").read_bytes() == payload


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, capture_output=True, check=True
    )
    return done.stdout.decode()


def test_git_deltas_decode_to_the_new_content(tmp_path: Path) -> None:
    """git writes a small change to a big file as a delta against the original."""
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitattributes").write_text("*.py binary\n")
    original = "".join(f"value_{i} = {i * 7}  # a line long enough to be worth copying\n" for i in range(400))
    changed = original.replace("value_200 = 1400", "value_200 = -1")
    (tmp_path / "big.py").write_text(original)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "base")
    (tmp_path / "big.py").write_text(changed)
    [patch] = parse(_git(tmp_path, "diff", "--binary", "--full-index"))
    assert patch.binary and patch.binary_hunks[0].method == "delta"
    assert new_content(patch, original.encode()) == changed.encode()
    with pytest.raises(PatchError, match="expects a"):
        new_content(patch, original.encode() + b"x")


def test_a_corrupt_delta_is_an_error_not_a_crash() -> None:
    header = bytes([5, 3])
    for delta, message in (
        (header + bytes([0]), "reserved opcode"),
        (header + bytes([0x91, 4, 9]), "past the end"),
        (header + bytes([10, 1]), "inside inserted data"),
        (header + bytes([2, 65, 66]), "makes 2 bytes"),
        (bytes([0x80]), "inside its header"),
    ):
        with pytest.raises(PatchError, match=message):
            apply_delta(b"hello", delta)
    bomb = BinaryHunk("literal", 10**9, ("A" + "0" * 5,))
    with pytest.raises(PatchError, match="over the"):
        inflate(bomb)


def test_a_binary_patch_of_text_is_judged_as_text_and_its_lines_are_seen() -> None:
    payload = "import atexit\natexit.register(print)\n"
    result = admit(parse(binary_patch("pkg/hook.py", None, payload.encode())), "tests", BASE_FILES, ALL_RULES)
    [kept] = result.kept
    assert not kept.binary and result.decoded == ["pkg/hook.py"]
    assert [text for _, text in kept.added_lines()] == payload.splitlines()
    assert kept.text.startswith("diff --git a/pkg/hook.py b/pkg/hook.py\nnew file mode 100644\n")


def test_a_binary_edit_of_a_base_file_becomes_the_equivalent_text_edit(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("a = 1\nb = 2\n")
    text = binary_patch("pkg/mod.py", b"a = 1\nb = 2\n", "a = 1\nb = 'ü'\n".encode())
    result = admit(parse(text), "tests", BASE_FILES, ALL_RULES, base_dir=tmp_path)
    [kept] = result.kept
    assert kept.added_lines() == [(2, "b = 'ü'")] and kept.removed_lines() == [(2, "b = 2")]


def test_a_decoded_binary_patch_meets_the_rules_of_its_path() -> None:
    text = (
        binary_patch("conftest.py", None, FORCE_PASS_CONFTEST.encode())
        + binary_patch("pkg/__pycache__/mod.cpython-311.pyc", None, b"print('hi')\n")
        + binary_patch(".gitignore", None, b"!*.pyc\n")
        + binary_patch("pkg/mod.pyc", None, unchecked_pyc("x = 1\n"))
    )
    result = admit(parse(text), "tests", BASE_FILES, ALL_RULES)
    assert [(p.path, why) for p, why in result.protected] == [("conftest.py", "conftest.py changes how tests run")]
    assert [(p.path, rule) for p, rule, _ in result.refused] == [
        ("pkg/__pycache__/mod.cpython-311.pyc", "bytecode"),
        (".gitignore", "vcs_config"),
        ("pkg/mod.pyc", "bytecode"),
    ]
    assert not result.kept


def test_true_binary_content_is_refused_and_kept_only_when_the_spec_allows_it() -> None:
    image = binary_patch("docs/new.png", None, b"\x89PNG\r\n\x1a\n\0\0\0")
    no_data = "diff --git a/docs/logo.png b/docs/logo.png\nindex 1234567..89abcde 100644\n"
    no_data += "Binary files a/docs/logo.png and b/docs/logo.png differ\n"
    result = admit(parse(image + no_data), "tests", BASE_FILES, ALL_RULES)
    assert [(p.path, rule) for p, rule, _ in result.refused] == [
        ("docs/new.png", "binary"),
        ("docs/logo.png", "binary"),
    ]
    assert "not UTF-8 text" in result.refused[0][2] and "without its data" in result.refused[1][2]
    lenient = admit(parse(image), "tests", BASE_FILES, ALL_RULES - {"binary"})
    assert [p.path for p in lenient.kept] == ["docs/new.png"] and lenient.kept[0].binary


def test_a_binary_symlink_is_decoded_before_its_target_is_judged() -> None:
    text = binary_patch("pkg/link", None, b"/etc/shadow", mode="120000")
    result = admit(parse(text), "tests", BASE_FILES, ALL_RULES)
    assert [rule for _, rule, _ in result.refused] == ["symlink_outside"]
