from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import DEMO, REPO
from tests.helpers import db_state
from trajectories.models import Step, Trajectory
from trajectories.schema import CLAIMED_KEYS

pytestmark = pytest.mark.django_db

SEED = DEMO / "seed_example.jsonl"


def export_lines(tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "out.jsonl"
    call_command("export", "trajectories", "--format", "jsonl", "--out", str(out), verbosity=0)
    return [json.loads(line) for line in out.read_text().splitlines()]


def assert_same_fields(original: dict[str, Any], exported: dict[str, Any]) -> None:
    """Every field of the original comes back with the same value (steps field by field).

    The outcome the file gave comes back as what it is, a claim: under `claimed`, while the
    record's own final_reward, success and flags stay empty until Crucible scores it.
    """
    for key, value in original.items():
        if key in CLAIMED_KEYS:
            assert exported["claimed"][key] == value, (key, exported["claimed"], value)
            assert exported[key] == ([] if key == "flags" else None), (key, exported[key])
        elif key == "steps":
            assert isinstance(value, list)
            assert len(exported["steps"]) == len(value)  # type: ignore[arg-type]
            for mine, theirs in zip(value, exported["steps"], strict=True):  # type: ignore[call-overload]
                for step_key, step_value in mine.items():
                    assert theirs[step_key] == step_value, (step_key, theirs[step_key], step_value)
        else:
            assert exported[key] == value, (key, exported[key], value)


def test_the_guides_example_round_trips_field_for_field(tmp_path: Path) -> None:
    original = json.loads(SEED.read_text())
    assert set(original) == {"task_id", "base_commit", "prompt", "steps", "final_reward", "success"}
    call_command("import_trajectories", str(SEED), "--allow-unknown-tasks", verbosity=0)
    (exported,) = export_lines(tmp_path)
    assert_same_fields(original, exported)
    assert exported["steps"][1]["action_input"] == original["steps"][1]["action_input"]  # an object stays one


def test_every_demo_trajectory_round_trips(tmp_path: Path) -> None:
    originals = [json.loads(line) for line in (DEMO / "trajectories.jsonl").read_text().splitlines() if line.strip()]
    call_command("import_trajectories", str(DEMO / "trajectories.jsonl"), "--allow-unknown-tasks", verbosity=0)
    exported = {e["trajectory_id"]: e for e in export_lines(tmp_path)}
    assert len(exported) == len(originals)
    for original in originals:
        if "trajectory_id" in original:
            assert_same_fields(original, exported[original["trajectory_id"]])


def test_an_export_imports_back_into_an_identical_store(tmp_path: Path) -> None:
    call_command("import_trajectories", str(DEMO / "trajectories.jsonl"), "--allow-unknown-tasks", verbosity=0)
    first = tmp_path / "first.jsonl"
    call_command("export", "trajectories", "--out", str(first), verbosity=0)
    Trajectory.objects.all().delete()
    call_command("import_trajectories", str(first), "--allow-unknown-tasks", verbosity=0)
    second = tmp_path / "second.jsonl"
    call_command("export", "trajectories", "--out", str(second), verbosity=0)
    assert first.read_text() == second.read_text()


def test_importing_the_same_file_twice_adds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_trajectories", str(DEMO / "trajectories.jsonl"), "--allow-unknown-tasks", verbosity=0)
    before = db_state()
    call_command("import_trajectories", str(DEMO / "trajectories.jsonl"), "--allow-unknown-tasks", verbosity=0)
    assert db_state() == before
    assert "0 trajectories (0 steps) imported" in capsys.readouterr().out


def test_imported_trajectories_link_to_known_tasks(demo_suite: object) -> None:
    linked = Trajectory.objects.exclude(task=None)
    assert linked.exists()
    assert all(t.suite_id == t.task.suite_id for t in linked.select_related("task"))  # type: ignore[union-attr]


GOOD = json.dumps({"task_id": "t1", "steps": [{"step": 1, "action_type": "read_file", "action_input": "a.py"}]})


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"task_id": "t1", "steps": [', "line 3: not valid JSON"),
        (json.dumps({"steps": []}), "line 3: task_id is missing"),
        (json.dumps({"task_id": 7}), "line 3: task_id"),
        (json.dumps({"task_id": "t", "steps": {}}), "line 3: steps must be a list"),
        (json.dumps({"task_id": "t", "final_reward": "high"}), "line 3: final_reward must be a number"),
        (json.dumps({"task_id": "t", "success": "yes"}), "line 3: success must be"),
        (json.dumps({"task_id": "t", "flags": {"detector": "x"}}), "line 3: flags must be a list"),
        (json.dumps({"task_id": "t", "claimed": [1.0]}), "line 3: claimed must be an object"),
        (json.dumps({"task_id": "t", "claimed": {"final_reward": "high"}}), "line 3: claimed.final_reward must be"),
        (json.dumps({"task_id": "t", "claimed": {"success": 1}}), "line 3: claimed.success must be"),
        (json.dumps({"task_id": "t", "claimed": {"verified": True}}), "line 3: claimed.verified is not one of"),
        (json.dumps({"task_id": "t", "steps": [{"action_type": "rm_rf"}]}), "line 3: steps\\[0\\].action_type 'rm_rf'"),
        (json.dumps({"task_id": "t", "steps": [{"action_type": "search", "reward": [1]}]}), "steps\\[0\\].reward"),
        (json.dumps({"task_id": "t", "steps": [{"action_type": "search", "timestamp": "yesterday"}]}), "timestamp"),
        (json.dumps({"task_id": "t", "trajectory_id": "not-a-uuid"}), "trajectory_id"),
        (json.dumps({"task_id": "t", "termination": "bored"}), "termination"),
        (json.dumps(["a", "list"]), "must be a JSON object"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_line_and_leaves_the_database_as_it_was(
    tmp_path: Path, bad_line: str, message: str
) -> None:
    call_command("import_trajectories", str(SEED), "--allow-unknown-tasks", verbosity=0)
    before = db_state()
    path = tmp_path / "bad.jsonl"
    other = json.dumps({"task_id": "t2", "steps": [{"action_type": "submit"}]})
    path.write_text(f"{GOOD}\n{other}\n{bad_line}\n{GOOD}\n")
    with pytest.raises(CommandError, match=message) as caught:
        call_command("import_trajectories", str(path), verbosity=0)
    assert "nothing was imported" in str(caught.value)
    assert db_state() == before


def test_a_100_mb_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("w") as fh:
        fh.write(GOOD + "\n")
        fh.write('{"task_id": "t", "prompt": "' + "A" * (100 * 1024 * 1024) + '"}\n')
    with pytest.raises(CommandError, match="line 2: line is longer than the 32 MiB limit"):
        call_command("import_trajectories", str(path), verbosity=0)
    assert Trajectory.objects.count() == 0


def test_nul_characters_from_agents_are_stored_safely(tmp_path: Path) -> None:
    path = tmp_path / "nul.jsonl"
    path.write_text(
        json.dumps(
            {
                "task_id": "t",
                "steps": [{"action_type": "run_command", "action_input": "cat a", "observation": "a\x00b"}],
            }
        )
        + "\n"
    )
    call_command("import_trajectories", str(path), "--allow-unknown-tasks", verbosity=0)
    assert Step.objects.get().observation == "a\ufffdb"


def test_the_export_command_refuses_an_unknown_suite(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no suite named 'nope'"):
        call_command("export", "trajectories", "--out", str(tmp_path / "x.jsonl"), "--suite", "nope", verbosity=0)
    assert not (tmp_path / "x.jsonl").exists()


def test_import_and_export_work_on_sqlite_too(tmp_path: Path) -> None:
    """The embedded default: a real SQLite file, through the real commands.

    The commands run one after another in one Django process (`manage.py shell`, each through
    call_command, what manage.py itself calls): a process start costs about 2 CPU-s on a busy
    2-core box, and what is tested is each command on SQLite, not the start. The error path
    is a real `manage.py` of its own, for its exit code and message.
    """
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
    }
    out = tmp_path / "out.jsonl"
    calls = [
        ("migrate",),
        ("import_tasks", str(DEMO / "tasks"), "--suite", "demo"),
        ("import_trajectories", str(DEMO / "trajectories.jsonl")),
        ("import_trajectories", str(SEED)),
        ("import_trajectories", str(DEMO / "trajectories.jsonl")),
        ("export", "trajectories", "--out", str(out)),
    ]
    script = (
        "import io, json\n"
        "from django.core.management import call_command\n"
        f"for args in {calls!r}:\n"
        "    buffer = io.StringIO()\n"
        "    call_command(*args, verbosity=0, stdout=buffer)\n"
        "    print(json.dumps(buffer.getvalue()))\n"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v0", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    said = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(said) == len(calls), done.stdout
    assert "trajectories" in said[2]
    assert "1 trajectories" in said[3]
    assert "0 trajectories (0 steps) imported" in said[4]
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    original = json.loads(SEED.read_text())
    seed_exports = [e for e in exported if e["steps"][0]["observation"] == original["steps"][0]["observation"]]
    assert seed_exports, "the minimal example record was imported"
    assert_same_fields(original, seed_exports[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(GOOD + "\n{oops\n")
    done = subprocess.run(
        [sys.executable, "manage.py", "import_trajectories", str(bad), "-v0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "line 2: not valid JSON" in done.stderr
