"""Environments between hosts with no shared disk: the host that builds one publishes it, a host without
the registry fetches it (checked against the hash on its row) instead of installing it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from pytest_django import Settings

from core.storage import object_store
from sandbox import Sandbox
from sandbox.environments import ROOT_ENV, EnvBuildError, EnvSpec, ensure_environment
from tasks.builders.environment import runner_pytest
from tasks.environments import archive_key, archive_members, prepare_environment
from tasks.models import TaskEnvironment
from tests.storage.conftest import S3Server

pytestmark = pytest.mark.django_db
SPEC = EnvSpec(requirements=("six>=1.16", runner_pytest()), pythonpath=("src",))


@pytest.fixture
def store(settings: Settings, s3_server: S3Server, bucket_url: str) -> None:
    settings.CRUCIBLE_STORAGE_URL = bucket_url
    settings.CRUCIBLE_S3_ENDPOINT_URL = s3_server.endpoint


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """This host cannot install anything: pip has no index, no links, no configuration."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")


def test_a_host_without_the_registry_fetches_the_environment_another_host_built(
    store: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "builder-envs"))
    built = prepare_environment(SPEC, "acme/calc").environment
    assert built is not None
    row = TaskEnvironment.objects.get(spec_hash=SPEC.spec_hash())
    assert len(row.archive_sha256) == 64 and object_store().size(archive_key(built.key)) == row.archive_bytes

    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "worker-envs"))
    offline(monkeypatch)
    fetched = ensure_environment(SPEC)
    assert fetched.key == built.key and not fetched.built_now
    assert fetched.path.is_relative_to(tmp_path / "worker-envs")
    repo = tmp_path / "repo"
    (repo / "src" / "calc").mkdir(parents=True)
    (repo / "src" / "calc" / "__init__.py").write_text("import six\n\n\ndef text(v):\n    return six.text_type(v)\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import text\n\n\ndef test_text():\n    assert text(2) == '2'\n"
    )
    with Sandbox(repo, "bwrap", environment=fetched) as box:
        report = box.run_tests()
    assert report.outcome("tests/test_calc.py::test_text") == "passed", report.exec.stderr[-500:]


def test_a_changed_archive_is_refused_and_the_host_installs_or_says_why(
    store: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "builder-envs"))
    built = prepare_environment(SPEC, "acme/calc").environment
    assert built is not None
    planted = io.BytesIO()
    with tarfile.open(fileobj=planted, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"{built.key}/bin/python")
        info.type, info.linkname = tarfile.SYMTYPE, "/bin/sh"
        tar.addfile(info)
    object_store().put_bytes(archive_key(built.key), planted.getvalue())

    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "worker-envs"))
    offline(monkeypatch)
    with pytest.raises(EnvBuildError, match="pip exited"):
        ensure_environment(SPEC)
    assert not (tmp_path / "worker-envs" / built.key).exists()


@pytest.mark.parametrize(
    ("name", "kind", "link", "message"),
    [
        ("/abc123/x", tarfile.REGTYPE, "", "outside abc123/"),
        ("abc123/../../etc/cron.d/x", tarfile.REGTYPE, "", "outside abc123/"),
        ("other/x", tarfile.REGTYPE, "", "outside abc123/"),
        ("abc123/bin/python", tarfile.SYMTYPE, "/etc/passwd", "outside the interpreter"),
        ("abc123/lib/x", tarfile.SYMTYPE, "../../../../etc", "link 'abc123/lib/x' points outside abc123/"),
        ("abc123/lib/y", tarfile.SYMTYPE, "../../other/z", "link 'abc123/lib/y' points outside abc123/"),
        ("abc123/bin/sh", tarfile.LNKTYPE, "abc123/bin/python", "not a file, folder or link"),
        ("abc123/dev", tarfile.CHRTYPE, "", "not a file, folder or link"),
    ],
)
def test_archive_members_that_leave_the_environment_are_refused(
    name: str, kind: bytes, link: str, message: str
) -> None:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, link
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(member)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar, pytest.raises(ValueError, match=message):
        archive_members(tar, "abc123")
