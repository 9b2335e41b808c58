"""Crucible harness: the runner's integrity, checked in the run itself.

A pytest plugin, loaded with -p into the one run that scores a patch. Crucible never
imports this module: rewards.behaviour.integrity reads it as text, fills in the run's
token and hashes, and Sandbox.run_tests writes it to the harness directory. So it imports
nothing from Crucible, only the standard library and pytest, and all of it here at the top:
the workspace goes on sys.path once the -p plugins are imported, and a module imported
later could be one the workspace planted.

Loaded before any conftest or code under test is imported, so what it records at import is
pytest as installed. Every check is wrapped: a fault in the checker is reported as an
error, never as a failed test of the task.
"""

# The printf formatting and the zip below are the code as it ran when it was a string in
# rewards/behaviour.py; changing them changes what a hostile value can make a check do
# (an f-string formats a non-str name where % raises), so that is a change of its own.
# ruff: noqa: UP031, B905

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
import types
from typing import Any

import pytest

# The harness fills these two in for each run (rewards.behaviour.integrity).
_TOKEN = ""
_HASHES: dict[str, str] = {}
_OUT = os.environ.get("CRUCIBLE_HARNESS_OUT", "")
_PID = os.getpid()
_ROOT = os.path.realpath(os.getcwd())
_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))
_WATCHED = ("_pytest", "pytest", "pluggy", "unittest.case", "builtins", "xml.etree.ElementTree")
# Checked after every test as well as at the end: what decides an outcome and carries it.
_TRIPWIRE = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.skipping",
    "_pytest.outcomes",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._result",
    "_pytest.python.Function",
    "_pytest.python.pytest_pyfunc_call",
    "_pytest.unittest.TestCaseFunction",
    "unittest.case.TestCase",
    "_pytest.junitxml.LogXML",
    "_pytest.junitxml._NodeReporter",
    "_pytest.terminal.TerminalReporter.pytest_runtest_logreport",
)
_HOOKS_PER_TEST = (
    "pytest_runtest_protocol",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "pytest_pyfunc_call",
    "pytest_report_teststatus",
    "pytest_runtest_logfinish",
    "pytest_exception_interact",
)
_MAX_FINDINGS = 40
_HEAPTYPE = 1 << 9
_FUNC = types.FunctionType
_MISSING = object()
_findings: list[str] = []
_errors: list[str] = []
_raised: dict[str, str] = {}
_seen: dict[str, str] = {}
_state: dict[str, Any] = {"pm": None, "inner": None, "caller_type": None, "tests": 0, "maxfail": None}
_verified: dict[int, Any] = {}  # id -> function, from conftests and test modules whose content was hashed
_trusted_ids: dict[int, Any] = {}  # id -> function already found trustworthy
_owners: list[tuple[Any, ...]] = []  # (label, owner, {attr: signature}, every key it had, how many)
_tripwire: list[tuple[Any, ...]] = []
_known: dict[int, Any] = {}


def _signature(value):
    """What must stay identical for `value` to do what it did; None when it is not tracked."""
    if isinstance(value, _FUNC):
        return (value, value.__code__, value.__defaults__, value.__kwdefaults__)
    if isinstance(value, (staticmethod, classmethod)):
        inner = value.__func__
        return (value, inner, getattr(inner, "__code__", None))
    if isinstance(value, property):
        return (value, value.fget, value.fset, value.fdel)
    if isinstance(value, (type, types.BuiltinFunctionType)):
        return (value,)
    return None


def _record(label, owner, space):
    signatures = {}
    for attr, value in list(space.items()):
        sig = _signature(value)
        if sig is not None:
            signatures[attr] = sig
            for part in sig:
                if isinstance(part, _FUNC):
                    _known[id(part)] = part
    entry = (label, owner, signatures, frozenset(space), len(space))
    _owners.append(entry)
    if label in _TRIPWIRE or label.rsplit(".", 1)[0] in _TRIPWIRE:
        _tripwire.append(entry)
    else:
        picked = {a: s for a, s in signatures.items() if label + "." + a in _TRIPWIRE}
        if picked:
            _tripwire.append((label, owner, picked, None, 0))


def _snapshot():
    del _owners[:], _tripwire[:]
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        if not (name in _WATCHED or name.split(".")[0] in _WATCHED):
            continue
        space = module.__dict__
        _record(name, space, space)
        for attr, value in list(space.items()):
            # Built-in (static) types cannot be changed; classes defined here can.
            if isinstance(value, type) and value.__flags__ & _HEAPTYPE and value.__module__ == name:
                _record(name + "." + attr, value, value.__dict__)


def _same(current, sig):
    if current is not sig[0]:
        return False
    if len(sig) == 4 and isinstance(current, _FUNC):
        return current.__code__ is sig[1] and current.__defaults__ is sig[2] and current.__kwdefaults__ is sig[3]
    if len(sig) > 1:
        now = _signature(current)
        return now is not None and all(a is b for a, b in zip(now, sig))
    return True


def _compare(entries):
    for label, owner, signatures, names, size in entries:
        space = owner if isinstance(owner, dict) else owner.__dict__
        for attr, sig in signatures.items():
            if not _same(space.get(attr, _MISSING), sig):
                what = "removed" if attr not in space else "replaced or its code changed"
                _note("%s.%s was %s" % (label, attr, what))
        if names is not None and len(space) != size:
            added = [k for k in list(space) if k not in names and _signature(space.get(k)) is not None]
            if added:
                _note("%s gained %s" % (label, ", ".join(sorted(added)[:5])))


def _note(text):
    if len(_findings) < _MAX_FINDINGS and text not in _findings:
        _findings.append(text)


# Code from these (the interpreter's own directories, read-only in a sandbox) may implement
# hooks; nothing under the workspace may, whatever the roots are.
_TRUSTED_ROOTS = tuple(
    sorted(
        {
            os.path.realpath(p)
            for p in (
                sys.prefix,
                sys.base_prefix,
                sys.exec_prefix,
                *(sysconfig.get_paths().get(k) or sys.prefix for k in ("stdlib", "platstdlib", "purelib", "platlib")),
            )
            if p and len(os.path.realpath(p)) > 1
        }
    )
)


def _under(path, roots):
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _module_trusted(module):
    path = os.path.realpath(getattr(module, "__file__", None) or "")
    if not path or not os.path.isfile(path):
        return False
    if os.path.dirname(path) == _HARNESS_DIR:
        return True  # the harness's own plugins, in its read-only directory
    return not _under(path, (_ROOT,)) and _under(path, _TRUSTED_ROOTS)


def _reachable(module, obj):
    found = module
    for part in obj.__qualname__.split("."):
        try:
            space = vars(found)
        except TypeError:
            return False
        found = space.get(part, _MISSING)
        if isinstance(found, (staticmethod, classmethod)):
            found = found.__func__
        if found is _MISSING:
            return False
    return found is obj


def _func_trusted(func):
    func = getattr(func, "__func__", func)
    if _trusted_ids.get(id(func)) is func:
        return True
    trusted = _known.get(id(func)) is func or _verified.get(id(func)) is func
    if not trusted and isinstance(func, _FUNC):
        name = func.__globals__.get("__name__")
        module = sys.modules.get(name) if isinstance(name, str) else None
        trusted = (
            module is not None
            and vars(module) is func.__globals__
            and _module_trusted(module)
            # _module_trusted has just found a file at module.__file__.
            and os.path.realpath(func.__code__.co_filename) == os.path.realpath(module.__file__)  # type: ignore[type-var]
            and _reachable(module, func)
        )
    if trusted:
        _trusted_ids[id(func)] = func
    return trusted


def _functions_of(module):
    found = {}
    name = module.__name__
    for value in list(vars(module).values()):
        if isinstance(value, _FUNC):
            found[id(value)] = value
        elif isinstance(value, type) and value.__module__ == name:
            for member in list(vars(value).values()):
                inner = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if isinstance(inner, _FUNC):
                    found[id(inner)] = inner
    return found


def _workspace_rel(path):
    path = os.path.realpath(path or "")
    if path and _under(path, (_ROOT,)):
        return os.path.relpath(path, _ROOT).replace(os.sep, "/")
    return None


def _hash_matches(rel):
    try:
        with open(os.path.join(_ROOT, rel), "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest() == _HASHES.get(rel)
    except OSError:
        return False


def _verify_module(module):
    rel = _workspace_rel(getattr(module, "__file__", None))
    if rel is None:
        return
    if rel not in _HASHES:
        if os.path.basename(rel) == "conftest.py":
            _note("conftest %s was not there when the harness planted its probes" % rel)
        return
    if not _hash_matches(rel):
        _note("%s changed during the run" % rel)
        return
    _verified.update(_functions_of(module))


def _plugin_trusted(plugin):
    if isinstance(plugin, types.ModuleType):
        if plugin is _SELF:
            return True
        rel = _workspace_rel(getattr(plugin, "__file__", None))
        if rel is not None:
            return rel in _HASHES
        return _module_trusted(plugin) and sys.modules.get(plugin.__name__) is plugin
    cls = type(plugin)
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    if module is None:
        return False
    rel = _workspace_rel(getattr(module, "__file__", None))
    if rel is not None:
        return rel in _HASHES
    return _module_trusted(module) and _reachable(module, cls)


def _describe(func):
    func = getattr(func, "__func__", func)
    code = getattr(func, "__code__", None)
    where = code.co_filename if code is not None else "?"
    return "%s from %s" % (getattr(func, "__qualname__", repr(func))[:80], where[-120:])


def _check_caller(name, caller, pm):
    if type(caller) is not _state["caller_type"]:
        _note(f"hook {name!r} is not a pluggy hook caller")
        return
    hookexec = getattr(caller, "_hookexec", None)
    if getattr(hookexec, "__self__", None) is not pm or getattr(hookexec, "__func__", None) is not _PM_HOOKEXEC:
        _note(f"hook {name!r} calls through a foreign executor")
    for impl in caller.get_hookimpls():
        if not _func_trusted(impl.function):
            _note("foreign implementation of %s: %s" % (name, _describe(impl.function)))


def _check_hooks(names=None):
    pm = _state["pm"]
    if pm is None:
        return
    if getattr(pm, "_inner_hookexec", None) is not _state["inner"]:
        _note("the plugin manager's hook executor was replaced")
    relay = vars(pm.hook)
    for name in names if names is not None else list(relay):
        caller = relay.get(name)
        if caller is not None:
            _check_caller(name, caller, pm)


def _check_instance(obj, label):
    try:
        space = vars(obj)
    except TypeError:
        return
    cls = type(obj)
    for attr, value in list(space.items()):
        if attr.startswith("__") or not callable(value):
            continue
        declared = getattr(cls, attr, _MISSING)
        if isinstance(declared, (_FUNC, staticmethod, classmethod)):
            _note("%s: instance attribute %s hides its class's method" % (label, attr))


def _check_plugins():
    pm = _state["pm"]
    if pm is None:
        return
    for plugin in list(pm.get_plugins()):
        if plugin is None:
            continue
        if not _plugin_trusted(plugin):
            _note("foreign plugin registered: %s" % (pm.get_name(plugin) or type(plugin).__qualname__)[:120])
        if not isinstance(plugin, types.ModuleType):
            _check_instance(plugin, "plugin %s" % type(plugin).__qualname__)


def _guard(label, check, *args):
    try:
        check(*args)
    except Exception as exc:
        if len(_errors) < 10:
            _errors.append("%s: %r" % (label, exc))


def pytest_addoption(parser, pluginmanager):
    _state["pm"] = pluginmanager
    _state["inner"] = getattr(pluginmanager, "_inner_hookexec", None)
    _state["caller_type"] = type(pluginmanager.hook.pytest_addoption)


def pytest_load_initial_conftests(early_config):
    # The snapshot is taken here: pytest's own legacypath plugin patches Config, Node, Session,
    # ... just before (tryfirst), and no conftest or code under test has been imported yet.
    _guard("snapshot", _snapshot)


def pytest_plugin_registered(plugin, manager):
    if isinstance(plugin, types.ModuleType):
        _guard("registration", _verify_module, plugin)


def pytest_configure(config):
    if not _owners:
        _guard("snapshot", _snapshot)
    # Probes fail by design: a -x or --maxfail in a task's command must not stop the run at one.
    if getattr(config.option, "maxfail", 0):
        _state["maxfail"] = config.option.maxfail
        config.option.maxfail = 0


def pytest_collect_file(file_path, parent):
    # A test module is read when it is imported, after code under test may have run: the
    # content pytest is about to import must be the content the harness left.
    rel = _workspace_rel(str(file_path))
    if rel is not None and rel in _HASHES and not _hash_matches(rel):
        _note("%s changed during the run, before it was collected" % rel)


def pytest_collection_finish(session):
    for item in session.items:
        _seen.setdefault(item.nodeid, "-")
    _guard("after collection", _compare, _tripwire)
    _guard("after collection hooks", _check_hooks)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    try:
        result = yield
    except BaseException as exc:
        if not isinstance(exc, (pytest.skip.Exception, pytest.xfail.Exception)):
            _raised[pyfuncitem.nodeid] = type(exc).__name__[:60]
        raise
    _raised.pop(pyfuncitem.nodeid, None)
    return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    try:
        return (yield)
    finally:
        _state["tests"] += 1
        _guard("per-test", _compare, _tripwire)
        _guard("per-test hooks", _check_hooks, _HOOKS_PER_TEST)
        _guard("item", _check_instance, item, "test item %s" % item.nodeid[:120])


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.outcome not in ("passed", "failed", "skipped"):
        return
    previous = _seen.get(report.nodeid, "-")
    if report.outcome == "failed":
        letter = "f" if report.when == "call" else "e"
    elif report.outcome == "skipped":
        letter = "s"
    elif report.when == "call":
        letter = "p"
    else:
        letter = previous
    if previous in ("e", "f") or (previous == "s" and letter == "p"):
        letter = previous if letter != "e" else "e"
    _seen[report.nodeid] = letter


def _write(data):
    if not _OUT or os.getpid() != _PID:
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(_OUT, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(data)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _guard("session end", _compare, _owners)
    _guard("session end hooks", _check_hooks)
    _guard("session end plugins", _check_plugins)
    record = {
        "token": _TOKEN,
        "findings": _findings,
        "errors": _errors,
        "raised": _raised,
        "seen": _seen,
        "tests": _state["tests"],
        "maxfail_overridden": _state["maxfail"],
        "truncated": False,
    }
    data = json.dumps(record)
    if len(data) > 900000:
        record["seen"] = {}
        record["truncated"] = True
        data = json.dumps(record)
        while len(data) > 900000 and record["raised"]:
            record["raised"] = dict(list(record["raised"].items())[: len(record["raised"]) // 2])
            data = json.dumps(record)
    _write(data)


_SELF = sys.modules[__name__]
_PM_HOOKEXEC = sys.modules["pluggy._manager"].PluginManager._hookexec
for _value in list(globals().values()):
    if isinstance(_value, _FUNC):
        _known[id(_value)] = _value
