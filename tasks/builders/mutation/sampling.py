"""Choosing among mutants and stacking two of them.

``sample_mutants`` spreads a seeded pick over files, then operators; ``combine`` merges
two single-change mutants of one file into a two-change bug.
"""

from __future__ import annotations

import random

from tasks.builders.mutation.model import Mutant
from tasks.builders.mutation.splice import compiles, parses


def sample_mutants(mutants: list[Mutant], count: int, seed: int) -> list[Mutant]:
    """Pick ``count`` mutants, deterministically for a seed, spread over files then operators.

    Files take turns (so one big module cannot crowd out the rest) and, inside a
    file, operators take turns; which mutant a turn yields is chosen by ``seed``.
    The input order does not matter.
    """
    if count <= 0:
        return []
    rng = random.Random(seed)
    by_file: dict[str, dict[str, list[Mutant]]] = {}
    for mutant in sorted(mutants, key=_mutant_key):
        by_file.setdefault(mutant.path, {}).setdefault(mutant.operator, []).append(mutant)

    per_file: list[list[Mutant]] = []
    for path in sorted(by_file):
        buckets = [by_file[path][operator] for operator in sorted(by_file[path])]
        for bucket in buckets:
            rng.shuffle(bucket)
        rng.shuffle(buckets)
        per_file.append(_round_robin(buckets))
    rng.shuffle(per_file)
    return _round_robin(per_file)[:count]


def combine(a: Mutant, b: Mutant) -> Mutant | None:
    """One mutant carrying both changes, or None when they touch the same text.

    Mutants of different files (or of different originals) also give None; the
    caller handles multi-file bugs. The result is the same whichever order the
    two are passed in: the change that comes first in the file comes first.
    """
    if a.path != b.path or a.original != b.original or a.mutated == b.mutated:
        return None
    first, second = sorted((a, b), key=lambda mutant: _change_span(mutant)[0])
    start1, end1, text1 = _change_span(first)
    start2, end2, text2 = _change_span(second)
    # Strict inequality: two edits that merely touch could be one edit seen twice
    # (an insertion right at the other's boundary), and then the order is ambiguous.
    if end1 >= start2:
        return None
    original = a.original
    mutated = original[:start1] + text1 + original[end1:start2] + text2 + original[end2:]
    if mutated in (original, a.mutated, b.mutated):
        return None
    if not parses(mutated, a.path, compiles(original, a.path)):
        return None
    return Mutant(
        path=a.path,
        operator=f"{first.operator}+{second.operator}",
        description=f"{first.description}; {second.description}",
        line=first.line,
        function=first.function,
        original=original,
        mutated=mutated,
    )


def _mutant_key(mutant: Mutant) -> tuple[str, int, str, str]:
    return (mutant.path, mutant.line, mutant.operator, mutant.mutated)


def _change_span(mutant: Mutant) -> tuple[int, int, str]:
    """The one region of ``original`` the mutant rewrote: (start, end, replacement)."""
    original, mutated = mutant.original, mutant.mutated
    limit = min(len(original), len(mutated))
    prefix = 0
    while prefix < limit and original[prefix] == mutated[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and original[-1 - suffix] == mutated[-1 - suffix]:
        suffix += 1
    return prefix, len(original) - suffix, mutated[prefix : len(mutated) - suffix]


def _round_robin(queues: list[list[Mutant]]) -> list[Mutant]:
    longest = max((len(queue) for queue in queues), default=0)
    return [queue[turn] for turn in range(longest) for queue in queues if turn < len(queue)]
