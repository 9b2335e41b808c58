"""Propose single-change mutants of Python source for synthetic bug injection.

Each mutant changes exactly one node of one file. This package only proposes
mutants; a later step runs the tests against each one and keeps those the
tests detect, so the operators favour plausible bugs over exhaustiveness and
skip places where a change is almost never observable (docstrings, type
annotations, ``__main__`` guards, logging calls).

Plain Python on purpose: no Django, so it can run inside a sandbox or a worker.

Modules, lowest first: ``model`` (operators, ``Mutant``), ``nodes`` (libcst
predicates and node factories), ``sites`` (the walk that proposes edits),
``splice`` (edit to text, syntax checks), ``generate`` (mutants of a file or a
repo), ``sampling`` (seeded picks and two-change combinations).
"""

from __future__ import annotations

from tasks.builders.mutation.generate import default_include, mutants_for_repo, mutants_for_source
from tasks.builders.mutation.model import OPERATORS, Mutant, MutationOperator
from tasks.builders.mutation.sampling import combine, sample_mutants

__all__ = [
    "OPERATORS",
    "Mutant",
    "MutationOperator",
    "combine",
    "default_include",
    "mutants_for_repo",
    "mutants_for_source",
    "sample_mutants",
]
