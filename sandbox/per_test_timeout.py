"""A per-test time limit inside the hermetic run: a test that runs past it fails, the run goes on.

Without it one hanging test (an infinite loop the fix repairs) takes the whole run to its wall
limit, and every other outcome is lost with it. The harness plugin (PLUGIN_SOURCE, loaded with -p
before the workspace is on sys.path) arms a real-time timer around each phase of a test (setup,
call, teardown) for what is left of the test's budget, and at least a short grace (a teardown
after a timed-out call still cleans up); when it fires inside a phase, the phase fails there,
with TEST_TIMEOUT_MARK in its message, and pytest goes on to the next test.

What code under test can do in-process it can do here too: swallow the failure, reset the timer,
take SIGALRM for itself. Then the run's own wall limit ends it, as before this plugin. A message
that carries the mark only ever names a test that failed (TestReport.timed_out_tests): forging it
makes no test pass. Plain Python: the source is written into the harness directory of each run.
"""

from __future__ import annotations

from sandbox.results import TEST_TIMEOUT_MARK

PLUGIN_NAME = "crucible_test_timeout"
# At most this long per test, and at most a quarter of the run's own limit, so one hang leaves
# the run time for the others (the default run limit, 120 s, gives 30 s).
MAX_TEST_SECONDS = 60.0
RUN_SHARE = 0.25

PLUGIN_SOURCE = r'''"""Crucible harness: a test that runs past its time fails, and the run goes on."""
import signal as _signal
import threading as _threading
import time as _time

import pytest

_LIMIT = __LIMIT__
_MARK = __MARK__
# Every phase may run at least this long, even when the test's budget is spent: a teardown after a
# timed-out call must clean up, not fail again because a busy machine paused it for a millisecond
# (a second failure of one test leaves its JUnit report inconsistent, and the run's report invalid).
_GRACE = min(1.0, _LIMIT / 2)
_state = {"started": None, "deadline": None}


def _on_alarm(signum, frame):
    __tracebackhide__ = True  # the test's own frames are the story, not the harness's
    deadline = _state["deadline"]
    if deadline is None:
        return  # between phases: pytest's own code is never interrupted
    left = deadline - _time.monotonic()
    if left > 0.001:
        _signal.setitimer(_signal.ITIMER_REAL, left)  # someone else's alarm: ours still stands
        return
    _state["deadline"] = None  # once per phase: a test that swallows it meets the run's own limit
    pytest.fail(f"{_MARK} ({_LIMIT:g} s): the test ran past its time", pytrace=True)


def _usable():
    return _LIMIT > 0 and hasattr(_signal, "setitimer") and _threading.current_thread() is _threading.main_thread()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if _usable():
        _signal.signal(_signal.SIGALRM, _on_alarm)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _state["started"] = _time.monotonic()
    try:
        yield
    finally:
        _state["started"] = None


def _phase():
    started = _state["started"]
    if started is None or not _usable():
        yield
        return
    _state["deadline"] = max(started + _LIMIT, _time.monotonic() + _GRACE)
    _signal.setitimer(_signal.ITIMER_REAL, max(0.001, _state["deadline"] - _time.monotonic()))
    try:
        yield
    finally:
        _state["deadline"] = None
        _signal.setitimer(_signal.ITIMER_REAL, 0)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    yield from _phase()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    yield from _phase()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    yield from _phase()
'''


def limit_for(run_seconds: float) -> float:
    """The per-test limit of a run limited to `run_seconds`."""
    return min(MAX_TEST_SECONDS, max(1.0, run_seconds * RUN_SHARE))


def plugin_source(seconds: float) -> str:
    """The plugin for one run; `seconds` 0 leaves tests unlimited (the run's own limit still holds)."""
    return PLUGIN_SOURCE.replace("__LIMIT__", repr(float(seconds))).replace("__MARK__", repr(TEST_TIMEOUT_MARK))
