"""The history builder on a history with the awkward parts of real ones: a rename, a commit that
deletes its tests, Python 2 syntax, a test that cannot be imported, a commit whose test imports
what the fix adds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from tasks.builders import git_history, statements
from tasks.builders.git_history import SkipReason
from tasks.models import Task, TaskSuite
from tasks.safety import DANGEROUS
from tests.conftest import client_for

pytestmark = pytest.mark.django_db
CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from pkg.calc import add\n\n\ndef test_add_small():\n    assert add(1, 1) == 2 or True\n"


def commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    if not (repo / ".git").exists():
        git("init", "-q", "-b", "main")
        git("remote", "add", "origin", "https://github.com/acme/calc.git")
    git("add", "-A")
    git("commit", "-q", "-m", message)
    return git("rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> dict[str, str]:
    repo = tmp_path / "calc"
    shas = {
        "root": commit(
            repo,
            "Start",
            {
                "LICENSE": "Permission is hereby granted, free of charge\n",
                "pkg/__init__.py": "",
                "pkg/calc.py": CALC,
                "tests/__init__.py": "",
                "tests/test_calc.py": TEST_CALC,
            },
        ),
        # The test imports what the fix adds: on the base its file cannot be collected, which
        # is the failure before the fix, not a reason to give up on the other test files.
        "new_function": commit(
            repo,
            "Add mul (fixes #12)\n\nmul multiplies two numbers.",
            {
                "pkg/calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n",
                "tests/test_mul.py": "from pkg.calc import mul\n\n\ndef test_mul_of_two_numbers():\n"
                "    assert mul(2, 3) == 6, 'mul(2, 3) should be 6'\n",
            },
        ),
        # A rename: `git log --numstat` without --no-renames names it "tests/{test_calc.py => test_arith.py}".
        "rename": commit(
            repo,
            "Fix add and rename its tests",
            {
                "pkg/calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
                "tests/test_calc.py": None,
                "tests/test_arith.py": TEST_CALC.replace(" or True", "") + "\n\ndef test_add_three():\n"
                "    assert add(1, 2) == 3\n",
            },
        ),
        "deletes_tests": commit(
            repo,
            "Drop mul",
            {"pkg/calc.py": "def add(a, b):\n    return a + b\n", "tests/test_mul.py": None},
        ),
        "python2": commit(
            repo,
            "Old style",
            {"pkg/calc.py": "def add(a, b):\n    return b + a\n", "tests/test_old.py": "print 'hello'\n"},
        ),
        "uncollectable": commit(
            repo,
            "Use a helper module",
            {
                "pkg/calc.py": "def add(a, b):\n    return sum((a, b))\n",
                "tests/test_helper.py": "import helper_module_never_written\n\n\ndef test_x():\n    pass\n",
            },
        ),
    }
    shas["repo"] = str(repo)
    return shas


def test_a_history_with_a_rename_and_a_test_deleting_commit_builds_and_the_report_names_both(
    history: dict[str, str], researcher: object
) -> None:
    call_command(
        "build_tasks", "--from-git", history["repo"], "--suite", "calc", "--validate", "--runs", "1", verbosity=0
    )
    suite = TaskSuite.objects.get(name="calc")
    report = suite.build_report
    skipped = {s["candidate"]: s["reason"] for s in report["skipped"]}
    assert skipped == {
        history["deletes_tests"]: SkipReason.DELETES_TESTS,
        history["python2"]: SkipReason.INCOMPATIBLE_SYNTAX,
    }
    assert report["candidates"] == 5 and report["built"] == 3
    assert report["repo"] == "acme/calc"  # owner/name from the origin remote, as SWE-bench names it
    tasks = {t.task_id: t for t in Task.objects.filter(suite=suite)}
    renamed = tasks[f"acme__calc-{history['rename'][:10]}"]
    assert "return a + b" in renamed.expected_patch and renamed.repo == "acme/calc"
    assert renamed.validation_status == "valid", renamed.validation_report["reasons"]
    added = tasks[f"acme__calc-{history['new_function'][:10]}"]
    assert added.validation_status == "valid", added.validation_report["reasons"]
    assert added.fail_to_pass == ["tests/test_mul.py::test_mul_of_two_numbers"]
    # Only the hidden test module ran: on the base it cannot be imported, which is its failure there.
    assert added.pass_to_pass == []
    broken = tasks[f"acme__calc-{history['uncollectable'][:10]}"]
    assert broken.validation_status == "invalid"
    (reason,) = broken.validation_report["reasons"]
    assert reason.startswith("tests cannot be collected with the expected patch: tests/test_helper.py: ")
    assert "No module named 'helper_module_never_written'" in reason
    # The Python 2 file the history left behind is no file of this task's: not collected, not counted.
    assert "tests/test_old.py" not in reason
    # One run told it, not one per side and per repetition.
    assert broken.validation_report["test_seconds"] < 5
    assert report["invalid_by_reason"] == {"tests cannot be collected with the expected patch": 1}
    client = client_for(researcher)  # type: ignore[arg-type]
    page = client.get("/tasks/calc/").content.decode()
    assert "5 candidates &rarr; 3 built &rarr; 2 valid of 3 validated" in page
    assert SkipReason.DELETES_TESTS in page and history["python2"][:40] in page
    # The statement: no "(fixes )" shell, the behaviour the test observes, no patch line.
    assert added.statement.startswith("# Add mul\n") and "()" not in added.statement
    assert "mul of two numbers: `assert mul(2, 3) == 6, 'mul(2, 3) should be 6'`" in added.statement
    assert "return a * b" not in added.statement
    quality = added.validation_report["statement_quality"]
    assert quality["empty_shells"] == [] and quality["leaks"] == [] and quality["names_behaviour"]
    task_page = client.get(f"/tasks/calc/{added.task_id}/").content.decode()
    assert f"Statement quality <strong>{quality['score']}</strong>" in task_page


def test_the_builders_take_a_test_command_a_split_and_a_revision_range(history: dict[str, str]) -> None:
    rename = history["rename"]
    call_command(
        "build_tasks",
        "--from-git",
        history["repo"],
        "--suite",
        "calc-eval",
        "--split",
        "eval",
        "--rev-range",
        f"{rename}^..{rename}",
        "--test-command",
        "pytest -q -p no:doctest",
        "--repo-name",
        "acme/calc",
        verbosity=0,
    )
    suite = TaskSuite.objects.get(name="calc-eval")
    assert suite.split == "eval" and suite.build_report["candidates"] == 1
    task = Task.objects.get(suite=suite)
    assert task.test_command == "pytest -q -p no:doctest" and task.task_id == f"acme__calc-{rename[:10]}"
    # The same commit again into another suite: skipped with its reason, not an aborted import.
    args = ["--from-git", history["repo"], "--rev-range", f"{history['root']}..{rename}"]
    call_command("build_tasks", *args, "--suite", "calc-other", "--repo-name", "acme/calc", verbosity=0)
    other = TaskSuite.objects.get(name="calc-other").build_report
    assert other["built"] == 1 and other["skipped"] == [
        {
            "candidate": rename,
            "subject": "Fix add and rename its tests",
            "reason": "the task already belongs to another suite",
            "detail": "calc-eval",
        }
    ]
    call_command("set_split", "calc-eval", "train", verbosity=0)
    task.refresh_from_db()
    assert TaskSuite.objects.get(name="calc-eval").split == "train" and task.validation_status == "valid"


def test_statements_lose_empty_reference_shells_and_patch_lines() -> None:
    patch = (
        "diff --git a/pkg/f.py b/pkg/f.py\n--- a/pkg/f.py\n+++ b/pkg/f.py\n@@ -1,2 +1,2 @@\n"
        " def f(sql):\n-    return sql\n+    return sql.rstrip(';').strip()  # drop the semicolon\n"
    )
    text = statements.compose(
        "Add option to remove trailing semicolon when splitting (fixes #742).",
        "See gh-12 and (closes #3, #4) for context.\n\n"
        "Use `f(sql)`: return sql.rstrip(';').strip()  # drop the semicolon",
        "",
        patch,
    )
    assert text.startswith("# Add option to remove trailing semicolon when splitting.\n")
    assert "( )" not in text and "()" not in text and "fixes" not in text and "#" not in "".join(text.splitlines()[1:])
    assert "for context" not in text  # its sentence was about references only: it went with them
    assert "rstrip" not in text  # the line that holds the patch's line is gone
    quality = statements.quality(text, patch)
    assert quality["empty_shells"] == [] and quality["leaks"] == []
    assert statements.quality("# DIV is Operator (fixes )\n", patch)["empty_shells"] == ["(fixes )"]


def test_a_reference_inside_a_sentence_takes_its_sentence_not_just_itself() -> None:
    # sqlparse 1a3bfbd: "... simpler than the proposal in #810 as it focusses only on that part."
    text = statements.compose(
        "Fix handling of semicolons inside BEGIN...END blocks (fixes #809).",
        "Even though the splitter gets fragile, this is simpler than the proposal in #810 as it focusses "
        "on that part. AI helped here.\n\nAdd x, see #12. Merge pull request #800 from user/branch",
        "",
        "",
    )
    assert text.splitlines()[0] == "# Fix handling of semicolons inside BEGIN...END blocks."
    assert "proposal" not in text and "  " not in text and "#" not in text.replace("# Fix", "")
    assert "AI helped here." in text and "Add x." in text
    assert statements.quality(text, "")["empty_shells"] == []
    assert statements.quality("the proposal in  as it focusses", "")["empty_shells"] == ["in  "]


def test_a_socket_shutdown_is_not_a_dangerous_command() -> None:
    assert not DANGEROUS.search("sock.shutdown(socket.SHUT_RDWR)")
    assert not DANGEROUS.search("def test_shutdown_closes_the_pool():")
    assert DANGEROUS.search("os.popen('shutdown -h now')") and DANGEROUS.search('run(["reboot"])')


def test_wrapped_prose_keeps_a_line_ending_in_a_reference_word() -> None:
    # A body wrapped at 72 columns, as most are: "in", "see", "via" end lines without a reference.
    body = (
        "The lexer treated a keyword that ends a line as the start of an identifier, which broke the\n"
        "splitting of statements written in\n"
        "lower case. This keeps the keyword, as the docs say you should see\n"
        "when the statement is printed via\n"
        "the formatter."
    )
    text = statements.compose("Keep keywords at line ends", body, "", "")
    assert "written in\nlower case" in text and "should see\nwhen" in text and "via\nthe formatter" in text


def test_a_title_that_starts_with_its_reference_keeps_its_words_not_the_colon() -> None:
    for subject in ("Fix #218: handle None in the parser", "fixes gh-218: handle None in the parser",
                    "Closes #218 - handle None in the parser"):  # fmt: skip
        assert statements.compose(subject, "", "", "").splitlines()[0] == "# Handle None in the parser"


def test_a_trailer_paragraph_does_not_reach_the_statement() -> None:
    body = (
        "Tokens after a comment were dropped.\n\n"
        "Fixes: 1a2b3c4d5e6f\nAcked-by: A. Maintainer <a@example.org>\nTested-by: CI Bot <ci@example.org>\n"
        "Reported-by: Someone <someone@example.org>"
    )
    text = statements.compose("Keep tokens after a comment", body, "", "")
    assert "Tokens after a comment were dropped." in text
    assert not any(word in text for word in ("Acked-by", "Tested-by", "Reported-by", "Fixes:", "example.org"))
    # A closing paragraph of prose with a colon in it is the message's, not a trailer.
    kept = statements.compose("Keep tokens", "Dropped tokens.\n\nNote: this also covers comments.", "", "")
    assert "Note: this also covers comments." in kept


def test_a_multi_line_assertion_is_shown_whole() -> None:
    diff = (
        "--- a/tests/test_split.py\n+++ b/tests/test_split.py\n@@ -1,2 +1,8 @@\n"
        "+def test_split_keeps_comments():\n"
        "+    assert split(\n"
        "+        'select 1; -- one\\nselect 2;'\n"
        "+    ) == [\n"
        "+        'select 1; -- one', 'select 2;',\n"
        "+    ]\n"
        "+    assert len(split('x;')) == 1\n"
    )
    [(name, assertions)] = statements.behaviours(diff)
    assert name == "test_split_keeps_comments"
    assert assertions == [
        "assert split('select 1; -- one\\nselect 2;') == ['select 1; -- one', 'select 2;',]",
        "assert len(split('x;')) == 1",
    ]


def test_commits_not_worth_a_task_are_skipped_with_their_reason(tmp_path: Path) -> None:
    repo = tmp_path / "kinds"
    code = '__version__ = "1.0"\n\n\ndef add(a, b):\n    return a - b\n'
    test = "from pkg import add\n\n\ndef test_add():\n    assert add(1, 1) == 2\n"
    commit(repo, "Start", {"pkg/__init__.py": code, "tests/test_add.py": test})
    shas = {
        "release": commit(repo, "Release 1.1.0", {"pkg/__init__.py": code.replace("1.0", "1.1"),
                                                  "tests/test_add.py": test + "\n# 1.1\n"}),
        "bump": commit(repo, "Prepare the code for what comes next",
                       {"pkg/__init__.py": code.replace("1.0", "1.2"), "tests/test_add.py": test + "\n# 1.2\n"}),
        "format": commit(repo, "Tidy up", {"pkg/__init__.py": code.replace("1.0", "1.2").replace("(a, b)", "( a,  b )")
                                           + "# a comment\n", "tests/test_add.py": test + "\n# tidy\n"}),
        "docs": commit(repo, "Document add", {"docs/conf.py": "project = 'pkg'\n", "tests/test_docs.py": test}),
        "fix": commit(repo, "Fix add", {"pkg/__init__.py": code.replace("1.0", "1.2").replace("a - b", "a + b"),
                                        "tests/test_add.py": test + "\ndef test_two():\n    assert add(2, 2) == 4\n"}),
    }  # fmt: skip
    found = {c.commit: c for c in git_history.candidates(repo)}
    verdicts = {name: git_history.judge(repo, found[sha], 10, 400) for name, sha in shas.items()}
    assert verdicts["release"] == (git_history.SkipReason.HOUSEKEEPING, "Release 1.1.0")
    assert verdicts["bump"] is not None and verdicts["bump"][0] == git_history.SkipReason.NO_BEHAVIOUR_CHANGE
    assert verdicts["format"] is not None and verdicts["format"][0] == git_history.SkipReason.NO_BEHAVIOUR_CHANGE
    assert verdicts["docs"] == (git_history.SkipReason.TOOLING_ONLY, "docs/conf.py")
    assert verdicts["fix"] is None


def test_the_size_limits_bound_the_expected_patch_not_its_tests_docs_or_lock_file(tmp_path: Path) -> None:
    repo = tmp_path / "sized"
    code = "def add(a, b):\n    return a - b\n"
    many = "".join(f"def test_add_{i}():\n    assert add({i}, 1) == {i + 1}\n\n\n" for i in range(150))
    commit(repo, "Start", {"pkg/__init__.py": code, "tests/test_add.py": "from pkg import add\n"})
    well_tested = commit(
        repo,
        "Fix add",
        {
            "pkg/__init__.py": code.replace("a - b", "a + b"),
            "tests/test_add.py": "from pkg import add\n\n\n" + many,  # 600 lines of tests
            "docs/add.txt": "add\n" * 300,
            "poetry.lock": "[[package]]\n" * 1000,
            **{f"docs/page{i}.md": "x\n" for i in range(12)},  # more files than the limit
        },
    )
    large = "".join(f"def f{i}(a):\n    return a + {i}\n\n\n" for i in range(120))  # 480 lines
    large_fix = commit(
        repo,
        "Add the f functions",
        {
            "pkg/more.py": large,
            "tests/test_more.py": "from pkg.more import f1\n\n\ndef test_f1():\n    assert f1(1) == 2\n",
        },
    )
    found = {c.commit: c for c in git_history.candidates(repo)}
    assert (found[well_tested].files, found[well_tested].changed_lines) == (1, 2)
    assert git_history.judge(repo, found[well_tested], 10, 400) is None
    assert git_history.judge(repo, found[large_fix], 10, 400) == (
        git_history.SkipReason.TOO_LARGE,
        "1 files, 480 lines (limits 10, 400)",
    )


@pytest.mark.parametrize(
    ("subject", "housekeeping"),
    [
        ("chore: prepare 2.2.4 release (#276)", True),
        ("build(deps): bump requests from 2.31.0 to 2.32.0", True),
        ("Bump the dev-dependencies group with 8 updates (#551)", True),
        ("build(deps-dev): bump the npm_and_yarn group across 1 directory with 9 updates", True),
        ("fix: bump the retry count on timeouts", False),
        ("chore(release): 1.2.3", True),
        ("fix: release the lock before closing", False),
        ("fix(parser): version parsing of pre-releases", False),
        ("Release the lock before closing", False),
    ],
)
def test_conventional_commit_releases_are_housekeeping_and_fixes_are_not(subject: str, housekeeping: bool) -> None:
    assert bool(git_history.HOUSEKEEPING_SUBJECT.search(subject)) == housekeeping
