"""The fast path of core.redaction finds exactly what the straightforward per-rule path finds.

The reference scans every string on its own with every rule, the straightforward reading of the
rules. The fast path leaves out every rule whose trigger a string lacks, skips strings without
any, and narrows a record's strings to the rules that can fire in any of them (a Scope). Same
text out, same findings, in the same order: a trigger that missed a match would show here.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.redaction import Redactor, redact_patch, redact_record, strings


class EveryRule(Redactor):
    """Every rule scanned in every string, but for the ones that read a label in any case
    (`aws_secret_key`, `bearer_token`): those only where the lowercased string holds it, as they
    always have (the regex's own case folding goes further: "ſecret" is no label here)."""

    def _active(self, text: str, among: tuple[int, ...] | None = None) -> tuple[int, ...]:
        lowered = text.lower()
        return tuple(
            index
            for index, rule in enumerate(self.rules)
            if not rule.lower or any(label in lowered for label in rule.lower)
        )


EXTRA = [("employee_id", r"\bEMP-\d{6}\b"), ("project", r"(?i:project-falcon)")]
FAST, SLOW = Redactor(), EveryRule()
FAST_EXTRA, SLOW_EXTRA = Redactor(host_suffixes=["acme", "corp"], extra=EXTRA), EveryRule(["acme", "corp"], EXTRA)
PAIRS = [(FAST, SLOW), (FAST_EXTRA, SLOW_EXTRA)]

AWS_KEY = "AKIAQ3EGUJ5XMPL7TEST"
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lg\n-----END RSA PRIVATE KEY-----"
PIECES = [
    AWS_KEY,
    "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = 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",
    "AWS_ſECRET_ACCESS_KEY=q8Fz1u2Lr7Yw0Xb5Nc3Vd6Ke9Pa4Sj",  # a long s: the regex folds it, lower() does not
    "Authorization: Bearer 7f3a9c2e8b1d4f6a0e5c",
    "BEARER 7f3a9c2e8b1d4f6a0e5c",
    "authorİzation: Basic dXNlcjpwYXNzd29yZDEyMzQ1",
    PRIVATE_KEY,
    PRIVATE_KEY[:70],
    "postgres://app:hunter2hunter@10.0.3.7/app",
    "redis://u:s3cretpass@10.0.0.5:6379",
    "http://u:p@example.org",
    "http://u:" + AWS_KEY + "@example.com",
    "git@gitlab.corp:team/app",
    "jane.roe@mailhost.io",
    "a@b.cc",
    "ops@docs.example.org",
    "ssh deploy@vault-3.prod.internal",
    "10.internal",
    "x10.local",
    "db1.corp.",
    "threading.local()",
    "from pkg.local import x",
    "192.168.1.254",
    "172.20.3.4:80",
    "10.2.3.4.5",
    "ghp_" + "a1B2c3D4e5" * 4,
    "github_pat_" + "x" * 30,
    "xoxb-1234567890-abcdefghij",
    "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "sk-proj-" + "Zx9" * 10,
    "crc_" + "k" * 40,
    "glpat-" + "a" * 24,
    "AIza" + "0" * 35,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl",
    "EMP-123456",
    "Project-Falcon",
    "build.acme",
    "[REDACTED:email]",
    "[REDACTED:aws_access_key]",
    "@property",
    "@@ -1,2 +1,2 @@",
    "$@",
    "a.b@c.d",
    "x@y",
    "test_10.py",
    "python3.10.4",
    "x172.16.0.1",
    "(172.16.0.1)",
    "192.168.0.1.5",
]
# Triggers cut off at a string's end, and characters that fold or lower unusually.
TAILS = ["AKI", "AKIA", "://", "10.", "@", ".internal", ".lan", "xox", "secret", "Bearer ", "eyJ", "sk-", "crc_"]
ODD = ["ſ", "K", "İ", "Σ", "ß", "é", "\u0307", "\x00", "\ufffd", "😀", "\u212b", "ﬀ"]
SEPARATORS = [" ", "\n", "\t", "=", ":", "'", '"', "(", ",", "/", "@", ".", "-", "_", ""]

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.lists(
    st.one_of(
        st.sampled_from(PIECES),
        st.sampled_from(TAILS),
        st.sampled_from(ODD),
        st.sampled_from(SEPARATORS),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
        st.text(alphabet="AKIBSCTabcdeikorstuxyz0123456789.:/@-_ ", max_size=12),
    ),
    max_size=16,
).map("".join)


def assert_same(fast: Redactor, slow: Redactor, text: str) -> None:
    assert fast.redact(text, "f") == slow.redact(text, "f"), text
    # Narrowed to the rules that can fire in a record that holds this string among others.
    scope = fast.scope(["ordinary text", text, "more"])
    assert scope.redact(text, "f") == slow.redact(text, "f"), text


@PROPERTY
@given(text=TEXT)
@example(text="10.internal")
@example(text="AWS_ſECRET_ACCESS_KEY=q8Fz1u2Lr7Yw0Xb5Nc3Vd6Ke9Pa4Sj")
@example(text="x@10.0.0.1.internal")
def test_the_fast_path_finds_what_the_per_rule_path_finds(text: str) -> None:
    for fast, slow in PAIRS:
        assert_same(fast, slow, text)


@PROPERTY
@given(parts=st.lists(TEXT, min_size=1, max_size=6))
def test_a_scope_of_many_strings_changes_none_of_them(parts: list[str]) -> None:
    for fast, slow in PAIRS:
        scope = fast.scope(parts)
        for part in parts:
            assert scope.redact(part, "f") == slow.redact(part, "f"), part


@pytest.mark.parametrize("piece", PIECES + TAILS)
@pytest.mark.parametrize("where", ["start", "end", "middle"])
def test_a_secret_anywhere_in_a_very_long_string_is_found_alike(piece: str, where: str) -> None:
    filler = ("def f(self, x):\n    return x.value + 1  # one more, see below\n" * 3000)[:100_000]
    text = {"start": piece + filler, "end": filler + piece, "middle": filler[:50_000] + piece + filler[50_000:]}[where]
    for fast, slow in PAIRS:
        assert fast.redact(text, "f") == slow.redact(text, "f")


def test_overlapping_and_touching_secrets_are_found_alike() -> None:
    texts = [
        "".join(PIECES),
        "\n".join(PIECES),
        AWS_KEY * 3,
        "u:" + AWS_KEY + "@" + "10.0.0.1" + ".internal",
        "jane@" + AWS_KEY + ".internal",
        PRIVATE_KEY.replace("\n", "\n" + AWS_KEY),
        "----BEGIN PRIVATE KEY-----" * 50,
        "a@" * 400 + "b.cc",
        ".internal" * 300,
    ]
    for fast, slow in PAIRS:
        for text in texts:
            assert_same(fast, slow, text)


@PROPERTY
@given(
    record=st.recursive(
        TEXT | st.integers() | st.none(),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
        max_leaves=12,
    ),
    diff=st.lists(st.tuples(st.sampled_from(["+", "-", " ", "@@ ", "+++ b/"]), TEXT), max_size=6),
)
def test_records_and_patches_redacted_through_a_scope_come_out_the_same(
    record: Any, diff: list[tuple[str, str]]
) -> None:
    patch = "\n".join(sign + line for sign, line in diff)
    for fast, slow in PAIRS:
        scope = fast.scope([*strings(record), patch])
        assert redact_record(record, "r", redactor=scope) == redact_record(record, "r", redactor=slow)
        assert redact_patch(patch, "p", redactor=scope) == redact_patch(patch, "p", redactor=slow)


def test_a_string_without_any_trigger_is_not_scanned() -> None:
    assert FAST._active("3 passed, 1 failed\n" + "x" * 200) == ()
    assert not FAST.scope(["pytest -q tests/test_5.py", "step 5: look at the failing test"])
    # An extra rule has no triggers: it is looked for everywhere.
    assert FAST_EXTRA._active("3 passed") == tuple(
        i for i, r in enumerate(FAST_EXTRA.rules) if r.name in {"employee_id", "project"}
    )
