"""The /etc a sandbox sees: one prepared copy of the few files commands read, mounted once,
taken again when a source changes on the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import Limits
from sandbox.backends.bwrap import BwrapBackend
from sandbox.runtime import HOSTS, prepared_etc


@pytest.fixture
def runner_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CRUCIBLE_RUNNER_DIR", str(tmp_path / "runners"))
    return tmp_path / "runners"


def _etc(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    etc = tmp_path / "etc"
    (etc / "ssl" / "certs").mkdir(parents=True)
    (etc / "ssl" / "certs" / "ca.pem").write_text("one\n")
    (etc / "ssl" / "certs" / "hash.0").symlink_to("ca.pem")
    (etc / "ld.so.cache").write_text("cache v1\n")
    return etc, (str(etc / "ssl" / "certs"), str(etc / "ld.so.cache"), "/usr")


def test_the_copy_holds_the_sources_with_their_links_and_nothing_else(tmp_path: Path, runner_dir: Path) -> None:
    etc, ro_paths = _etc(tmp_path)
    (etc / "shadow").write_text("secret\n")  # in /etc, but not a source: never copied
    copy = Path(prepared_etc(ro_paths, str(etc)))
    assert copy.parent == runner_dir
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == [
        "hosts", "ld.so.cache", "ssl", "ssl/certs", "ssl/certs/ca.pem", "ssl/certs/hash.0",
    ]  # fmt: skip
    assert (copy / "hosts").read_text() == HOSTS  # the sandbox's own, never the host's
    assert os.readlink(copy / "ssl" / "certs" / "hash.0") == "ca.pem"
    assert prepared_etc(ro_paths, str(etc)) == str(copy)  # made once


def test_a_source_replaced_on_the_host_gives_a_new_copy(tmp_path: Path, runner_dir: Path) -> None:
    etc, ro_paths = _etc(tmp_path)
    first = Path(prepared_etc(ro_paths, str(etc)))
    # As dpkg does: a new file renamed over the old one.
    (etc / "ld.so.cache.new").write_text("cache v2, after an upgrade\n")
    (etc / "ld.so.cache.new").rename(etc / "ld.so.cache")
    second = Path(prepared_etc(ro_paths, str(etc)))
    assert second != first
    assert (second / "ld.so.cache").read_text() == "cache v2, after an upgrade\n"


def test_an_unwritable_runner_dir_falls_back_to_one_mount_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CRUCIBLE_RUNNER_DIR", str(blocker / "runners"))
    etc, ro_paths = _etc(tmp_path)
    assert prepared_etc(ro_paths, str(etc)) == ""


def test_the_sandbox_mounts_etc_once_and_sees_only_the_copy(tmp_path: Path) -> None:
    backend = BwrapBackend()
    argv = backend.argv(["true"], tmp_path, Limits(), {})
    etc_binds = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 2].startswith("/etc")]
    assert etc_binds == [[backend.runtime.etc, "/etc"]]
    result = backend.run(
        ["sh", "-c", "ls /etc; test -s /etc/ld.so.cache && test -d /etc/ssl/certs && ! test -e /etc/passwd && echo ok"],
        tmp_path,
        Limits(),
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split()[-1] == "ok"
    assert "shadow" not in result.stdout.split()


def test_localhost_resolves_and_serves_in_the_sandbox(tmp_path: Path) -> None:
    """A runner or a test that serves on localhost (Vite 7's dev server does) needs the name: without
    an /etc/hosts the lookup failed with EAI_AGAIN. Python's and Node's resolvers both find it."""
    script = "import socket; s = socket.socket(); s.bind(('localhost', 0)); s.listen(); print(s.getsockname()[0])"
    node = "require('dns').lookup('localhost', {family: 4}, (e, a) => console.log(e ? e.code : a))"
    result = BwrapBackend().run(["sh", "-c", f'python3 -c "{script}" && node -e "{node}"'], tmp_path, Limits())
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["127.0.0.1", "127.0.0.1"]
