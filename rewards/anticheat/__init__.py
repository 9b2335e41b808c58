"""Anti-cheat detectors. Each finding carries evidence: where, and the text that tripped it.

The static detectors read the syntax tree of every changed Python file as it stands after
the patch, not the `+` lines of a diff: a policy that has read this module hides names
("_py" + "test", getattr with a computed string, importlib, a base64 payload, a data file
run with exec), so names are resolved through imports, aliases and constant folding, and
code handed to exec/compile is parsed and scanned in turn. Static analysis cannot see
everything a program does; these findings are evidence for a person and for the reward
spec's policies, while the behaviour checks of the test run (canaries, sentinel twins, the
runner's integrity) decide whether a run was forged.

Findings already present in the base version of a file are not the agent's and are
dropped, so a repository that legitimately reads `sys.argv` in its CLI is not blamed when
an agent fixes a bug next to it.

The package, lowest first (each module imports only those above it):
  flags       Flag and SourceScan (what the reward sees), Finding (what one source yields)
  patterns    what the detectors look for, detector names, bounds
  files       safe reading of the workspace; paths outside it
  source      one source's state and what its names refer to
  folding     constant folding of hidden strings, payloads and paths
  equality    eq_override: comparisons that always agree
  detectors   the walk and every other detector; exec payloads scanned in turn
  scan        scan_sources (with the base comparison) and scan_commands
"""

from __future__ import annotations

from rewards.anticheat.flags import Flag, SourceScan
from rewards.anticheat.scan import scan_commands, scan_sources

__all__ = ["Flag", "SourceScan", "scan_commands", "scan_sources"]
