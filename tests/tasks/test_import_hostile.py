"""Task directories and archives made by an attacker: links, special files, zip-slip and tar-slip.

Each hole is tried the way an attacker would plant it, and each test checks both the clear
error and that nothing of the host file reached the database, the store or a workspace.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sandbox import Sandbox
from sandbox.backends.base import SandboxError
from sandbox.backends.bwrap import BwrapBackend
from tasks.models import Task
from tasks.services import import_task_dirs, task_spec_from_dir
from tasks.spec import TaskSpec, copy_hidden_tests
from tasks.storage import store_root
from tasks.taskdir import TaskDirError
from tests.conftest import DEMO
from tests.helpers import db_state

pytestmark = pytest.mark.django_db

SECRET = "crucible-secret-key-7f3a9c"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A host file the importing user can read and the task's author cannot (var/secret_key)."""
    path = tmp_path / "var" / "secret_key"
    path.parent.mkdir()
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture
def outside_tests(tmp_path: Path) -> Path:
    """A host folder of Python files that a linked tests/ folder would pull in."""
    path = tmp_path / "host-folder"
    path.mkdir()
    (path / "test_leak.py").write_text(f"def test_leak():\n    assert {SECRET!r}\n")
    return path


def refused(path: Path, message: str) -> None:
    before = db_state()
    with pytest.raises(TaskDirError, match=message):
        import_task_dirs(path, "hostile")
    assert db_state() == before
    assert not Task.objects.filter(statement__contains=SECRET).exists()


def test_a_task_md_linked_to_a_secret_file_is_refused_and_never_becomes_a_statement(
    task_dir: Path, secret: Path
) -> None:
    (task_dir / "task.md").unlink()
    (task_dir / "task.md").symlink_to(secret)
    refused(task_dir, r"task\.md: symbolic links are not allowed")


def test_a_linked_expected_patch_is_refused(task_dir: Path, secret: Path) -> None:
    (task_dir / "expected_patch").unlink()
    (task_dir / "expected_patch").symlink_to(secret)
    refused(task_dir, r"expected_patch: symbolic links are not allowed")
    assert not Task.objects.filter(expected_patch__contains=SECRET).exists()


def test_a_linked_folder_in_tests_is_refused_not_skipped(task_dir: Path, outside_tests: Path) -> None:
    (task_dir / "tests" / "helpers").symlink_to(outside_tests, target_is_directory=True)
    refused(task_dir, r"tests/helpers: symbolic links are not allowed")


@pytest.mark.parametrize("where", ["repo_snapshot", "tests"])
def test_a_linked_tree_root_is_refused(task_dir: Path, outside_tests: Path, where: str) -> None:
    real = task_dir / where
    real.rename(task_dir / f"{where}.real")
    real.symlink_to(outside_tests, target_is_directory=True)
    refused(task_dir, rf"{where}: symbolic links are not allowed")


@pytest.mark.parametrize("where", ["repo_snapshot/configkit/pipe", "tests/pipe", "notes/pipe"])
def test_a_fifo_anywhere_in_a_task_dir_is_refused(task_dir: Path, where: str) -> None:
    (task_dir / where).parent.mkdir(exist_ok=True)
    os.mkfifo(task_dir / where)
    refused(task_dir, rf"{where}: is a FIFO; only regular files and folders are allowed")


def test_a_linked_task_dir_in_a_folder_of_them_is_refused(tmp_path: Path, task_dir: Path) -> None:
    folder = tmp_path / "batch"
    folder.mkdir()
    task_dir.rename(folder / "task_0001")
    (folder / "task_0002").symlink_to(DEMO / "tasks" / "task_0002", target_is_directory=True)
    refused(folder, r"batch/task_0002: symbolic links are not allowed")


def test_the_operators_own_path_argument_may_be_a_link(tmp_path: Path, task_dir: Path) -> None:
    link = tmp_path / "current"
    link.symlink_to(task_dir, target_is_directory=True)
    assert import_task_dirs(link, "linked").created == 1


# --- archives -----------------------------------------------------------------------------


def tar_of(
    task_dir: Path, path: Path, extra: Callable[[tarfile.TarFile], None], gz: bool = True, arcname: str = ""
) -> Path:
    with tarfile.open(path, "w:gz") if gz else tarfile.open(path, "w") as tar:
        tar.add(task_dir, arcname=arcname or f"tasks/{task_dir.name}")
        extra(tar)
    return path


def add_file(tar: tarfile.TarFile, name: str, data: bytes = b"x\n") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def add_special(kind: bytes, name: str, target: str = "") -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        if kind == tarfile.CHRTYPE:
            info.devmajor, info.devminor = 1, 3
        tar.addfile(info)

    return add


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp folder archives are unpacked into, so a test can see what was written there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (lambda tar: add_file(tar, "tasks/../../escaped"), r"'tasks/\.\./\.\./escaped' has a '\.\.' part"),
        (lambda tar: add_file(tar, "../escaped"), r"'\.\./escaped' has a '\.\.' part"),
        (
            add_special(tarfile.SYMTYPE, "tasks/task_0001/tests/test_leak.py", "/etc/passwd"),
            r"test_leak\.py' is a symbolic link",
        ),
        (add_special(tarfile.LNKTYPE, "tasks/task_0001/task.md.2", "tasks/task_0001/task.md"), "is a hard link"),
        (add_special(tarfile.CHRTYPE, "tasks/task_0001/tests/null"), "is a device"),
        (add_special(tarfile.FIFOTYPE, "tasks/task_0001/tests/pipe"), "is a FIFO"),
        (lambda tar: add_file(tar, "/tmp/crucible-escaped"), "is an absolute path"),  # noqa: S108
    ],
)
def test_a_hostile_tar_is_refused_before_anything_is_written(
    tmp_path: Path, task_dir: Path, private_tmp: Path, extra: Callable[[tarfile.TarFile], None], message: str
) -> None:
    archive = tar_of(task_dir, tmp_path / "tasks.tar.gz", extra)
    before = db_state()
    with pytest.raises(CommandError, match=message):
        call_command("import_tasks", str(archive), "--suite", "hostile", verbosity=0)
    assert db_state() == before
    assert list(private_tmp.iterdir()) == []  # no unpack folder left, nothing beside it
    assert not (tmp_path / "escaped").exists() and not Path("/tmp/crucible-escaped").exists()  # noqa: S108


def zip_of(task_dir: Path, path: Path, extra: Callable[[zipfile.ZipFile], None]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(task_dir.rglob("*")):
            if file.is_file():
                zf.write(file, f"{task_dir.name}/{file.relative_to(task_dir).as_posix()}")
        extra(zf)
    return path


def zip_symlink(zf: zipfile.ZipFile) -> None:
    info = zipfile.ZipInfo("task_0001/tests/test_leak.py")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    zf.writestr(info, "/etc/passwd")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (lambda zf: zf.writestr("/tmp/crucible-escaped", "x"), "is an absolute path"),  # noqa: S108
        (lambda zf: zf.writestr("task_0001/../../escaped", "x"), r"has a '\.\.' part"),
        (zip_symlink, "is a symbolic link"),
    ],
)
def test_a_hostile_zip_is_refused_before_anything_is_written(
    tmp_path: Path, task_dir: Path, private_tmp: Path, extra: Callable[[zipfile.ZipFile], None], message: str
) -> None:
    archive = zip_of(task_dir, tmp_path / "tasks.zip", extra)
    with pytest.raises(TaskDirError, match=message):
        import_task_dirs(archive, "hostile")
    assert not Task.objects.exists()
    assert list(private_tmp.iterdir()) == []
    assert not (tmp_path / "escaped").exists() and not Path("/tmp/crucible-escaped").exists()  # noqa: S108


def test_good_archives_import_like_the_folder_they_hold(tmp_path: Path, task_dir: Path, private_tmp: Path) -> None:
    import_task_dirs(task_dir, "from-folder")
    version = Task.objects.get(task_id="task_0001").version
    Task.objects.all().delete()
    call_command(
        "import_tasks", str(tar_of(task_dir, tmp_path / "t.tar", lambda tar: None, gz=False)), "--suite", "tar"
    )
    assert Task.objects.get(task_id="task_0001").version == version
    Task.objects.all().delete()
    assert import_task_dirs(zip_of(task_dir, tmp_path / "t.zip", lambda zf: None), "zip").created == 1
    assert Task.objects.get(task_id="task_0001").version == version
    Task.objects.all().delete()
    # `tar -C task_0001 -czf t.tgz .`: members start with "." itself.
    assert import_task_dirs(tar_of(task_dir, tmp_path / "t.tgz", lambda tar: None, arcname="."), "dot").created == 1
    assert Task.objects.get(task_id="task_0001").version == version
    assert list(private_tmp.iterdir()) == []


def test_an_error_inside_an_archive_names_the_archive_not_the_temp_folder(
    tmp_path: Path, task_dir: Path, private_tmp: Path
) -> None:
    (task_dir / "metadata.json").write_text("{not json")
    archive = tar_of(task_dir, tmp_path / "tasks.tar.gz", lambda tar: None)
    with pytest.raises(
        TaskDirError, match=r"tasks\.tar\.gz/tasks/task_0001: metadata\.json is not valid JSON"
    ) as caught:
        import_task_dirs(archive, "hostile")
    assert str(private_tmp) not in str(caught.value)


# --- scoring from the store -----------------------------------------------------------------


@pytest.mark.parametrize("linked", ["folder", "file"])
def test_score_patch_refuses_a_task_dir_whose_hidden_tests_are_linked(
    tmp_path: Path, task_dir: Path, outside_tests: Path, linked: str
) -> None:
    if linked == "folder":
        (task_dir / "tests").rename(tmp_path / "tests.real")
        (task_dir / "tests").symlink_to(outside_tests, target_is_directory=True)
    else:
        (task_dir / "tests" / "test_leak.py").symlink_to(outside_tests / "test_leak.py")
    with pytest.raises(CommandError, match="symbolic links are not allowed"):
        call_command("score_patch", "--task", str(task_dir), "--patch", str(task_dir / "expected_patch"), "--json")


def test_a_task_dir_is_scored_from_the_content_addressed_store(task_dir: Path) -> None:
    spec = task_spec_from_dir(task_dir)
    assert spec.base_dir.parent == store_root() and spec.tests_dir.parent == store_root()
    assert [p.name for p in spec.tests_dir.iterdir()] == ["test_parse_config.py"]
    assert spec.fail_to_pass == ("tests/test_parse_config.py::test_empty_input",)


def test_copy_hidden_tests_never_copies_a_host_file_through_a_link(tmp_path: Path, secret: Path) -> None:
    base, tests = tmp_path / "base", tmp_path / "hidden"
    base.mkdir()
    tests.mkdir()
    (tests / "test_ok.py").write_text("def test_ok():\n    pass\n")
    (tests / "test_secret.py").symlink_to(secret)
    task = TaskSpec(task_id="t", base_dir=base, tests_dir=tests, fail_to_pass=(), pass_to_pass=())
    with Sandbox(base, BwrapBackend()) as box:
        with pytest.raises(SandboxError, match=r"test_secret\.py: symbolic links are not allowed"):
            copy_hidden_tests(box, task)
        copied = [p for p in box.workspace.rglob("*") if p.is_file()]
        assert all(SECRET not in p.read_text() for p in copied)
