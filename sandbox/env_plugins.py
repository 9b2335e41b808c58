"""The pytest plugins a built environment declares, found the way pytest's autoload would.

Autoload stays off in every run (a workspace's .dist-info would otherwise add plugins of the
agent's); these are named with -p instead, read on the host from the environment's read-only venv.
"""

from __future__ import annotations

import functools
import logging
import re
from importlib import metadata

from sandbox.environments import Environment, normalise
from sandbox.runner_env import site_packages

logger = logging.getLogger(__name__)

PLUGIN_GROUP = "pytest11"
MAX_PLUGINS = 32
_MODULE = re.compile(r"[A-Za-z_]\w{0,99}(?:\.[A-Za-z_]\w{0,99}){0,9}", re.ASCII)


@functools.cache
def _declared_plugins(site: str) -> tuple[str, ...]:
    modules: list[str] = []
    for dist in sorted(metadata.distributions(path=[site]), key=lambda d: normalise(d.metadata["Name"] or "")):
        for entry in sorted(dist.entry_points.select(group=PLUGIN_GROUP), key=lambda e: e.name):
            if not _MODULE.fullmatch(entry.value) or entry.value in modules:
                # `module:attr` cannot be named with -p, and pytest's own plugins load without it.
                logger.info("environment %s: pytest plugin %s = %r is not loaded", site, entry.name, entry.value[:80])
                continue
            modules.append(entry.value)
    return tuple(modules[:MAX_PLUGINS])


def environment_plugins(env: Environment) -> tuple[str, ...]:
    """The modules of the pytest plugins (entry point group pytest11) the environment's own
    distributions declare: what pytest's autoload would find in an installed environment.

    Read on the host from the built, read-only venv, never from sys.path inside the run, so a
    .dist-info in the workspace adds no plugin. The venv is content-addressed: read once."""
    return _declared_plugins(str(site_packages(env.path)))
