"""Go and JavaScript tasks leave Crucible with their language and their runner's environment: task
directories, SWE-bench rows and Harbor directories (run here as Harbor would run them, under bwrap,
the host's Go and Node standing in for the image's), and a Harbor directory comes back the same task."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sandbox import Limits, Sandbox
from sandbox.backends.bwrap import BwrapBackend
from sandbox.node_env import ensure_node_modules
from tasks import exports
from tasks.harbor import harbor_files
from tasks.harbor_import import import_harbor_dirs
from tasks.harbor_lang_verifier import NODE_MODULES, go_outcomes
from tasks.harbor_run import read_reward, run_harbor_task
from tasks.models import Task
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.tasks.harbor_schema import validate_task_toml

pytestmark = pytest.mark.django_db
LIMITS = Limits(wall_seconds=120, memory_mb=4096)  # Vitest needs more address space than pytest


def export(tmp_path: Path, suite: str, fmt: str) -> Path:
    out = tmp_path / f"{suite}-{fmt}.out"
    call_command("export", "tasks", "--format", fmt, "--suite", suite, "--out", str(out), verbosity=0)
    if fmt == "swe-bench":
        return out
    with tarfile.open(out) as archive:
        archive.extractall(tmp_path / f"{suite}-{fmt}", filter="data")
    return tmp_path / f"{suite}-{fmt}" / f"tasks-{fmt}"


@pytest.fixture
def go_suite() -> None:
    import_task_dirs(DEMO / "go_tasks", "demo-go", "train")


@pytest.fixture
def js_suite() -> None:
    import_task_dirs(DEMO / "js_tasks", "demo-js", "train")


def test_swebench_rows_name_the_language_and_the_runner_and_list_the_runners_ids(
    go_suite: None, js_suite: None, tmp_path: Path
) -> None:
    rows = {}
    for suite in ("demo-go", "demo-js"):
        for line in export(tmp_path, suite, "swe-bench").read_text().splitlines():
            row = json.loads(line)
            rows[row["instance_id"]] = row
    go, js = rows["go_0001"], rows["js_0001"]
    assert (go["language"], js["language"]) == ("go", "javascript")
    assert go["test_cmd"].startswith("go test -json") and js["test_cmd"] == "npx vitest run"
    assert json.loads(go["FAIL_TO_PASS"]) == ["example.com/numkit/lists::TestChunkKeepsTheRemainder"]
    assert json.loads(js["FAIL_TO_PASS"])[0] == "test/kit.test.js::paginate > returns the first page"
    # The hidden tests at their place in the repository: a Go test beside its package's code.
    assert go["test_patch"].startswith("diff --git a/lists/lists_test.go b/lists/lists_test.go")
    assert js["test_patch"].startswith("diff --git a/test/kit.test.js b/test/kit.test.js")
    python = Task.objects.get(task_id="go_0002")
    python.metadata = {k: v for k, v in python.metadata.items() if k != "language"}
    assert exports.swebench_instance(python)["language"] == "python"
    assert exports.swebench_instance(python)["test_cmd"] == python.test_command
    assert exports.test_patch(python) == go["test_patch"]  # same hidden tests, same place


def test_task_directories_keep_the_language_and_the_runner_files(
    go_suite: None, js_suite: None, tmp_path: Path
) -> None:
    before = dict(Task.objects.values_list("task_id", "version"))
    for suite, runner_file in (("demo-go", "go.mod"), ("demo-js", "package-lock.json")):
        out = export(tmp_path, suite, "taskdir")
        for task in out.iterdir():
            assert json.loads((task / "metadata.json").read_text())["language"] in ("go", "javascript")
            assert (task / "repo_snapshot" / runner_file).is_file()
        Task.objects.filter(suite__name=suite).delete()
        import_task_dirs(out, suite, "train")
    assert dict(Task.objects.values_list("task_id", "version")) == before


def test_a_go_task_exports_a_go_environment_that_scores_its_solution_1_and_the_base_0(
    go_suite: None, tmp_path: Path
) -> None:
    out = export(tmp_path, "demo-go", "harbor")
    task = out / "go_0003"
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert "FROM golang:1.19" in dockerfile and "GOPROXY=off" in dockerfile and "pip install" not in dockerfile
    assert "go test -json -count=1" in (task / "tests" / "test.sh").read_text()
    assert not (task / "tests" / "pytest.ini").exists() and not (task / "environment" / "requirements.txt").exists()
    assert (task / "tests" / "runner" / "go.mod").read_text() == (task / "environment" / "repo" / "go.mod").read_text()
    described = json.loads((task / "tests" / "crucible_task.json").read_text())
    runs = [["./lists", "-run=^(TestChunkKeepsTheRemainder|TestChunkRefusesNonPositiveSizes|TestChunkSplitsEvenly"]]
    assert described["go_runs"][0][0] == runs[0][0] and described["go_runs"][0][1].startswith(runs[0][1])
    toml = validate_task_toml((task / "task.toml").read_text())
    assert tomllib.loads((task / "task.toml").read_text())["metadata"]["crucible"]["language"] == "go", toml

    solved = run_harbor_task(task, solve=True, base=task / "environment" / "repo", limits=LIMITS)
    assert solved.rewards["reward"] == 1.0, solved.output
    assert solved.rewards["fail_to_pass_passed"] == solved.rewards["fail_to_pass_total"] == 2
    unsolved = run_harbor_task(task, solve=False, base=task / "environment" / "repo", limits=LIMITS)
    assert unsolved.rewards["reward"] == 0.0 and unsolved.rewards["fail_to_pass_passed"] == 0, unsolved.output
    assert unsolved.rewards["pass_to_pass_passed"] == unsolved.rewards["pass_to_pass_total"] == 6


def run_js_as_harbor(task: Path, solve: bool, tmp_path: Path) -> dict[str, float]:
    """solve.sh then test.sh under bwrap, the lock's packages (npm ci, as the image's build runs it)
    mounted where the Dockerfile installs them."""
    modules = ensure_node_modules(task / "environment" / "repo")
    logs = tmp_path / f"logs-{solve}"
    (logs / "verifier").mkdir(parents=True)
    backend = BwrapBackend()
    with Sandbox(task / "environment" / "repo", backend, limits=LIMITS) as box:
        steps = [("/solution/solve.sh", "solution", "/solution")] if solve else []
        for script, folder, mount in [*steps, ("/tests/test.sh", "tests", "/tests")]:
            done = backend.run(
                ["bash", "-c", f"cd /app && exec bash {script}"],
                box.workspace,
                LIMITS,
                extra_ro_binds=[(task / folder, mount), (modules, str(NODE_MODULES))],
                extra_rw_binds=[(box.workspace, "/app"), (logs, "/logs")],
            )
            assert done.exit_code == 0, done.stdout + done.stderr
    return read_reward(logs)


def test_the_harbor_vitest_config_carries_the_bases_options_and_nothing_else(tmp_path: Path) -> None:
    from tasks.harbor_lang import vitest_config

    task = Task(task_id="t", fail_to_pass=["a.test.js::x"], pass_to_pass=[])
    assert 'globals: false, environment: "node", testTimeout: 5000,' in vitest_config(task, tmp_path)
    (tmp_path / "vite.config.ts").write_text(
        "export default { test: { globals: true, environment: 'happy-dom', testTimeout: 9000, setupFiles: ['e.js'] } }"
    )
    config = vitest_config(task, tmp_path)
    assert 'globals: true, environment: "happy-dom", testTimeout: 9000,' in config
    assert "e.js" not in config  # setup files stay the verifier's (none)


def test_a_javascript_task_exports_node_and_vitest_and_scores_its_solution_1_and_the_base_0(
    js_suite: None, tmp_path: Path
) -> None:
    out = export(tmp_path, "demo-js", "harbor")
    task = out / "js_0001"
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert "FROM node:20" in dockerfile and "npm ci --ignore-scripts" in dockerfile
    assert "vitest/vitest.mjs run --config /tests/vitest.config.mjs" in (task / "tests" / "test.sh").read_text()
    assert '"test/kit.test.js"' in (task / "tests" / "vitest.config.mjs").read_text()

    solved = run_js_as_harbor(task, True, tmp_path)
    assert solved["reward"] == 1.0 and solved["fail_to_pass_passed"] == 2, solved
    unsolved = run_js_as_harbor(task, False, tmp_path)
    assert unsolved["reward"] == 0.0 and unsolved["fail_to_pass_passed"] == 0, unsolved
    assert unsolved["pass_to_pass_passed"] == unsolved["pass_to_pass_total"] == 6


def test_a_javascript_task_whose_package_names_jest_and_not_vitest_runs_jest(js_suite: None, tmp_path: Path) -> None:
    copy = tmp_path / "js_0002"
    shutil.copytree(DEMO / "js_tasks" / "js_0002", copy)
    package = json.loads((copy / "repo_snapshot" / "package.json").read_text())
    package["devDependencies"] = {"jest": "30.0.0"}
    (copy / "repo_snapshot" / "package.json").write_text(json.dumps(package))
    Task.objects.filter(task_id="js_0002").delete()
    import_task_dirs(copy, "demo-js", "train")
    files = {path: content for path, content, _ in harbor_files(Task.objects.get(task_id="js_0002"))}
    test_sh = files["js_0002/tests/test.sh"].decode()
    assert "jest/bin/jest.js --config /tests/jest.config.json" in test_sh and "vitest" not in test_sh
    config = json.loads(files["js_0002/tests/jest.config.json"])
    assert config["rootDir"] == "/app" and config["testRegex"] == ["^/app/test/kit\\.test\\.js$"]
    assert "js_0002/tests/vitest.config.mjs" not in files


def test_an_exported_harbor_directory_comes_back_the_same_task_with_its_language(
    go_suite: None, js_suite: None, tmp_path: Path
) -> None:
    before = dict(Task.objects.values_list("task_id", "version"))
    for suite in ("demo-go", "demo-js"):
        out = export(tmp_path, suite, "harbor")
        Task.objects.filter(suite__name=suite).delete()
        import_harbor_dirs(out, suite, "train")
    assert dict(Task.objects.values_list("task_id", "version")) == before
    assert {t.metadata["language"] for t in Task.objects.filter(suite__name="demo-go")} == {"go"}
    assert {t.metadata["language"] for t in Task.objects.filter(suite__name="demo-js")} == {"javascript"}


def test_the_go_reader_takes_the_worse_end_and_believes_no_pass_of_a_package_that_failed_as_a_whole() -> None:
    stream = b"\n".join(
        json.dumps(event).encode()
        for event in (
            {"Action": "pass", "Package": "m/p", "Test": "TestA"},
            {"Action": "pass", "Package": "m/p", "Test": "TestB"},  # printed by the test, then really failed
            {"Action": "fail", "Package": "m/p", "Test": "TestB"},
            {"Action": "fail", "Package": "m/p"},
            {"Action": "pass", "Package": "m/q", "Test": "TestC"},  # then a TestMain that exits 1
            {"Action": "fail", "Package": "m/q"},
            {"Action": "pass", "Package": "m/r", "Test": "TestD"},
            {"Action": "pass", "Package": "m/r"},
        )
    )
    assert go_outcomes(stream + b"\nFAIL\tm/s [build failed]\n") == {
        "m/p::TestA": True,
        "m/p::TestB": False,
        "m/p": False,
        "m/q::TestC": False,
        "m/q": False,
        "m/r::TestD": True,
        "m/r": True,
    }


def test_a_go_swebench_row_imports_back_as_the_same_go_task(tmp_path: Path) -> None:
    """A row that names `language: go` builds a Go task (its test_cmd is the runner's, not a command to
    keep), and exporting that task gives the row again; an unknown language is refused, nothing written."""
    task_dir = DEMO / "go_tasks" / "go_0001"
    clone = tmp_path / "repos" / "acme__numkit"
    shutil.copytree(task_dir / "repo_snapshot", clone)
    base = _commit(clone, "numkit")
    row = _row(task_dir, clone, base, "lists/lists_test.go", language="go", test_cmd="go test -json ./...")
    given = tmp_path / "given.jsonl"
    given.write_text(json.dumps({**row, "language": "cobol"}) + "\n")
    with pytest.raises(CommandError, match="language must be one of"):
        call_command("import_tasks", str(given), "--repos", str(tmp_path / "repos"), "--suite", "swe-go", verbosity=0)
    assert not Task.objects.exists()
    given.write_text(json.dumps(row) + "\n")
    call_command("import_tasks", str(given), "--repos", str(tmp_path / "repos"), "--suite", "swe-go", verbosity=0)
    task = Task.objects.get(task_id="acme__numkit-1")
    assert task.language == "go" and task.tests_dest == "lists"
    exported = tmp_path / "exported.jsonl"
    shutil.copy(export(tmp_path, "swe-go", "swe-bench"), exported)
    (out,) = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {k: out[k] for k in row if k not in ("test_patch", "test_cmd")} == {
        k: v for k, v in row.items() if k not in ("test_patch", "test_cmd")
    }
    version = task.version
    call_command("import_tasks", str(exported), "--repos", str(tmp_path / "repos"), "--suite", "swe-go", verbosity=0)
    assert Task.objects.get(task_id="acme__numkit-1").version == version and Task.objects.count() == 1


def _row(task_dir: Path, clone: Path, base: str, test: str, **fields: str) -> dict[str, str]:
    """A SWE-bench row of the demo task at `task_dir`, whose base is `base` in `clone` (owner__name):
    its hidden test, at `test` in the repository, is the row's test_patch."""
    work = clone.parent.parent / f"work-{clone.name}"
    shutil.copytree(clone, work)
    (work / test).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(task_dir / "tests" / Path(test).name, work / test)
    _git(work, "add", "-A")
    meta = json.loads((task_dir / "metadata.json").read_text())
    return {
        "instance_id": f"{clone.name}-1",
        "repo": clone.name.replace("__", "/"),
        "base_commit": base,
        "patch": (task_dir / "expected_patch").read_text(),
        "test_patch": _git(work, "diff", "--cached") + "\n",
        "problem_statement": (task_dir / "task.md").read_text(),
        "FAIL_TO_PASS": json.dumps(meta["fail_to_pass"]),
        "PASS_TO_PASS": json.dumps(meta["pass_to_pass"]),
        **fields,
    }


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_a_javascript_row_whose_base_has_no_lock_carries_the_resolved_one_there_and_back(tmp_path: Path) -> None:
    """A task built on a base without a lock (tasks.builders.lang_history.ensure_lock) exports the lock
    it was validated with as the row's `package_lock`, since base_commit does not hold it; importing
    the row puts it back in the base. A lock the registry rule refuses, or one given for a base that
    has its own, is refused and nothing is written."""
    task_dir = DEMO / "js_tasks" / "js_0001"
    clone = tmp_path / "repos" / "acme__kit"
    shutil.copytree(task_dir / "repo_snapshot", clone)
    lock = (clone / "package-lock.json").read_text()
    (clone / "package-lock.json").unlink()
    base = _commit(clone, "kit")
    row = _row(task_dir, clone, base, "test/kit.test.js", language="javascript", package_lock=lock)
    given = tmp_path / "given.jsonl"
    forged = json.loads(lock)
    first = next(k for k in forged["packages"] if k)
    forged["packages"][first]["resolved"] = "file:../../etc"
    for bad, why in ((json.dumps(forged), "does not come from the configured registry"), (7, "must be the text")):
        given.write_text(json.dumps({**row, "package_lock": bad}) + "\n")
        with pytest.raises(CommandError, match=why):
            call_command(
                "import_tasks", str(given), "--repos", str(tmp_path / "repos"), "--suite", "swe-js", verbosity=0
            )
        assert not Task.objects.exists()
    given.write_text(json.dumps(row) + "\n")
    call_command("import_tasks", str(given), "--repos", str(tmp_path / "repos"), "--suite", "swe-js", verbosity=0)
    task = Task.objects.get(task_id="acme__kit-1")
    assert task.metadata["npm_lock"] == "resolved"
    (out,) = [json.loads(line) for line in export(tmp_path, "swe-js", "swe-bench").read_text().splitlines()]
    assert out["package_lock"] == lock and out["base_commit"] == base
    # The base's own lock, when it has one, is the task's: a second one is not taken.
    (clone / "package-lock.json").write_text(lock)
    _git(clone, "add", "-A")
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "lock")
    row["base_commit"] = _git(clone, "rev-parse", "HEAD")
    row["instance_id"] = "acme__kit-2"
    given.write_text(json.dumps(row) + "\n")
    with pytest.raises(CommandError, match="has its own"):
        call_command("import_tasks", str(given), "--repos", str(tmp_path / "repos"), "--suite", "swe-js", verbosity=0)
    assert Task.objects.count() == 1
