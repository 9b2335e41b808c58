"""Behaviour checks that do not read the patch: canaries, sentinel twins and the runner's own integrity.

A policy that has read the scorer can hide what its patch does from any reading of the
patch (names built from pieces, payloads in data files, bytecode, ...). What it cannot
hide is what the run does, so three probes go into the one test run scoring makes:

- canaries (`canaries`): copies of FAIL_TO_PASS tests with a tail no code can satisfy
  (`assert [..] is [..]`: two fresh objects). On unfixed code a canary fails exactly as
  the test it copies, so a forger that flips only "real" failures flips it too; on honest
  code it fails at the tail. A canary that passes, or vanishes while the test it copies
  passed, means the run was forged.
- sentinel twins (`twins`): for each FAIL_TO_PASS test, a copy whose equality assertions
  compare the same computed value with a fresh sentinel and with perturbed copies of the
  expected value (one more key or item, one leaf swapped, a number moved), which honest
  code never equals. The comparisons run in the twin's own frame, named like a test, so a
  value that looks at who compares it sees what it sees in the real test. A twin that
  passes proves an always-equal result.
- a runner integrity plugin (`integrity_plugin`, a module read as text and run with `-p`;
  `integrity` fills it in): pytest's, pluggy's and unittest's functions and classes must
  stay the ones it recorded before any conftest or code under test ran; every hook
  implementation and plugin must come from pytest, the interpreter's own directories, the
  harness or a conftest/test module whose content the harness hashed; hidden test files
  must not change before pytest reads them; and every test the JUnit report calls passed
  must have passed in the run as the plugin saw it.

Names and places are drawn from the salt and the task (same inputs, same probes, same
reward; unpredictable without the salt) in the style of the hidden tests around them
(`placement`): inside the hidden test files (`hosts`), or in new files beside them where the
module can safely run twice. The hidden tests and the probes run in one pytest invocation,
the probes among the tests they copy (`planting`); `judge` turns the run into flags.
Residual risks (a plugin an attacker finds and silences, a forger that tells probes from
tests by their source) are in docs/reward-threat-model.md.

Plain Python, no Django: a training subprocess or a remote worker scores the same way.
"""

from __future__ import annotations

from rewards.behaviour.integrity import integrity_plugin
from rewards.behaviour.judge import judge_probes, probe_outcome
from rewards.behaviour.model import ProbeError, Probes
from rewards.behaviour.planting import plant_probes

__all__ = ["ProbeError", "Probes", "integrity_plugin", "judge_probes", "plant_probes", "probe_outcome"]
