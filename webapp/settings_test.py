"""Test settings: a private var/ and Redis database, fast password hashing.

Set through the environment before the main settings load, so that subprocesses the
tests start (a Celery worker, a server) get the same values by inheriting it.
"""

from __future__ import annotations

import os
import tempfile
from urllib.parse import urlsplit, urlunsplit

# pytest-xdist runs the suite in several worker processes at once, each on its own database
# (pytest-django suffixes its name); each gets its own var/ and Redis namespace too. A process a
# test starts (a Celery worker, a server) inherits its test process's values through the environment.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_SET_FOR = os.environ.get("CRUCIBLE_TEST_WORKER")
if _SET_FOR is not None and _SET_FOR != _WORKER:
    # An xdist worker inherits what its controller set for itself: it makes its own instead.
    os.environ.pop("CRUCIBLE_VAR_DIR", None)
    os.environ.pop("CRUCIBLE_INSTANCE", None)
os.environ["CRUCIBLE_TEST_WORKER"] = _WORKER
if "CRUCIBLE_VAR_DIR" not in os.environ:
    os.environ["CRUCIBLE_VAR_DIR"] = tempfile.mkdtemp(prefix=f"crucible-test-var-{_WORKER}-")
if "CRUCIBLE_TEST_REDIS" not in os.environ:
    # Database 13 keeps the tests' queues and groups apart from a running `make run`.
    parts = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    os.environ["CRUCIBLE_TEST_REDIS"] = urlunsplit(parts._replace(path="/13"))
os.environ["REDIS_URL"] = os.environ["CRUCIBLE_TEST_REDIS"]
# Its own instance name (queues, results and live groups under it), inherited by the workers and
# servers a test starts, so nothing of a `make run` or another test session on this Redis reaches it.
os.environ.setdefault("CRUCIBLE_INSTANCE", f"crucible-test-{os.getpid()}{'-' + _WORKER if _WORKER else ''}")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from webapp.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# A file, not memory, for SQLite test databases: a worker process the tests start
# must see the same database as the test.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}  # noqa: F405
# Subprocesses started by a test are pointed at the test database by name.
if os.environ.get("CRUCIBLE_DB_NAME"):
    DATABASES["default"]["NAME"] = os.environ["CRUCIBLE_DB_NAME"]  # noqa: F405
