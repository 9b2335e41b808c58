from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sandbox.backends.docker import DockerBackend

REPO = Path(__file__).resolve().parents[2]
KEYS = {"exit_code", "stdout", "stderr", "truncated", "timed_out", "duration_ms", "startup_ms"}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


def test_exec_prints_one_json_object_per_the_contract(repo: Path) -> None:
    done = cli(
        "exec",
        "--backend",
        "bwrap",
        "--workspace",
        str(repo),
        "--timeout",
        "30",
        "--",
        "python",
        "-c",
        "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert KEYS <= set(result)
    assert (result["exit_code"], result["stdout"], result["stderr"]) == (3, "out\n", "err\n")
    assert result["startup_ms"] > 0 and result["duration_ms"] >= result["startup_ms"]


def test_exec_works_on_a_copy_and_reports_timeouts(repo: Path) -> None:
    done = cli("exec", "--workspace", str(repo), "--timeout", "1", "--", "sh", "-c", "touch made-here; sleep 30")
    result = json.loads(done.stdout)
    assert result["timed_out"] is True and result["exit_code"] is None
    assert not (repo / "made-here").exists()


def test_bad_input_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    missing = cli("exec", "--workspace", str(tmp_path / "nope"), "--", "true")
    assert missing.returncode == 2 and "not a directory" in missing.stderr
    no_cmd = cli("exec", "--workspace", str(repo))
    assert no_cmd.returncode == 2 and "no command" in no_cmd.stderr
    local = cli("exec", "--backend", "local", "--workspace", str(repo), "--", "true")
    assert local.returncode == 2 and "does not isolate" in local.stderr
    allowed = cli("exec", "--backend", "local", "--allow-unsafe-local", "--workspace", str(repo), "--", "true")
    assert json.loads(allowed.stdout)["exit_code"] == 0


def test_exec_runs_on_the_docker_backend_with_the_same_contract(repo: Path, docker_backend: DockerBackend) -> None:
    assert docker_backend.base_url
    done = cli(
        "exec",
        "--backend",
        "docker",
        "--workspace",
        str(repo),
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        "echo begun; sleep 876721",
        env={"DOCKER_HOST": docker_backend.base_url},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert KEYS | {"killed_by"} == set(result)
    assert (result["stdout"], result["exit_code"], result["timed_out"], result["killed_by"]) == (
        "begun\n",
        None,
        True,
        "wall",
    )
