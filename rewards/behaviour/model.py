"""What crosses the package's edges: the probes of one run, the tests they copy, and why one cannot be copied.

`Probes` is what planting hands to the test run (the arguments and plugins) and to the
judge (which ids are probes, what each copies, the token the integrity record must carry).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rewards.breakdown import ProbesPart


class ProbeError(ValueError):
    """A test that cannot be copied into a probe (the reason goes in the breakdown)."""


@dataclass
class Probes:
    canary_ids: list[str] = field(default_factory=list)  # pytest node ids that MUST fail
    # twin node id -> the FAIL_TO_PASS id it shadows (a parametrized test's first FAIL_TO_PASS id)
    twin_ids: dict[str, str] = field(default_factory=dict)
    plugins: list[tuple[str, str]] = field(default_factory=list)  # (module name, source) for run_tests(plugins=)
    files: list[str] = field(default_factory=list)  # workspace-relative paths written (new or changed)
    # Every test to run, hidden tests and probes together, in the order to run them: the
    # hidden tests in their natural (file, line) order with the probes among them, so
    # neither the position in argv nor the order of the run tells a probe from a test.
    args: list[str] = field(default_factory=list)
    canary_sources: dict[str, str] = field(default_factory=dict)  # canary id -> the hidden test it copies
    token: str = ""  # what the integrity plugin's record must carry to be the harness's own
    # FAIL_TO_PASS ids without a twin and why (no probe names: this goes in the breakdown).
    not_twinned: dict[str, str] = field(default_factory=dict)

    def summary(self) -> ProbesPart:
        """For the score breakdown: counts and reasons, never the probes' names."""
        return {
            "canaries": len(self.canary_ids),
            "twins": len(self.twin_ids),
            "integrity_plugin": bool(self.plugins),
            "not_twinned": dict(self.not_twinned),
        }


@dataclass(frozen=True)
class NodeRef:
    file: str
    classes: tuple[str, ...]
    name: str
    params: str  # "[...]" or ""
    nodeid: str

    def with_name(self, file: str, name: str) -> str:
        """The id of a probe copied from this test: the whole function, every parameter of it.

        Naming one parameter would be cheaper, but pytest runs nothing at all when one id on
        its command line names no test, and a copy's parameters are only as predictable as
        whatever generates them.
        """
        return "::".join([file, *self.classes, name])


def parse_nodeid(nodeid: str) -> NodeRef | None:
    """tests/test_x.py::TestC::test_y[p] -> its parts; None for anything that is not a Python test."""
    if "::" not in nodeid:
        return None
    file, rest = nodeid.split("::", 1)
    params = ""
    if "[" in rest:
        rest, params = rest[: rest.index("[")], rest[rest.index("[") :]
    names = rest.split("::")
    if not file.endswith(".py") or not all(n.isidentifier() for n in names):
        return None
    return NodeRef(file, tuple(names[:-1]), names[-1], params, nodeid)
