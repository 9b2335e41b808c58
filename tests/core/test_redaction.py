"""core.redaction's rules, on plain strings (no database): what each catches, what it keeps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.redaction import (
    RedactionConfigError,
    Redactor,
    load_patterns,
    placeholder,
    redact_patch,
    redact_record,
    redact_text,
)

# Made-up values of the documented shapes; none is a live credential.
AWS_KEY = "AKIAQ3EGUJ5XMPL7TEST"
AWS_SECRET = "q8Fz1u2Lr7Yw0Xb5Nc3Vd6Ke9Pa4Sj/Tm+Hg0Ri2"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----"
)

CASES = [
    ("aws_access_key", f"export AWS_ACCESS_KEY_ID={AWS_KEY}", AWS_KEY),
    ("aws_access_key", f"key:AWS_KEY_{AWS_KEY}", AWS_KEY),  # glued to a name with "_"
    ("aws_secret_key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("aws_secret_key", f'"SecretAccessKey": "{AWS_SECRET}"', AWS_SECRET),
    ("private_key_block", f"cat id_rsa\n{PRIVATE_KEY}\n$ ls", "MIIEowIBAAKCAQEAu1SU1"),
    # Truncated output: the block never ends, its body must still go.
    ("private_key_block", PRIVATE_KEY[:120], "MIIEowIBAAKCAQEAu1SU1"),
    ("github_token", "token ghp_" + "a1B2c3D4e5" * 4, "ghp_a1B2c3D4e5"),
    ("slack_token", "xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
    ("openai_key", "OPENAI_API_KEY=sk-proj-" + "Zx9" * 10, "sk-proj-Zx9"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlX2hlcmU", "eyJzdWIiOiIx"),
    ("bearer_token", "curl -H 'Authorization: Bearer 7f3a9c2e8b1d4f6a0e5c'", "7f3a9c2e8b1d4f6a0e5c"),
    ("url_password", "DATABASE_URL=postgres://app:hunter2hunter@db.prod.net:5432/app", "hunter2hunter"),
    ("internal_host", "ssh deploy@build-7.ci.corp && curl http://metrics.internal/x", "metrics.internal"),
    ("internal_host", "ping printer.local.", "printer.local"),
    ("private_ip", "listening on 10.12.0.7:8000", "10.12.0.7"),
    ("private_ip", "gateway 192.168.1.254, peer 172.20.3.4", "172.20.3.4"),
    ("email", "Reported-by: Jane Roe <jane.roe@mailhost.io>", "jane.roe@mailhost.io"),
]


@pytest.mark.parametrize(("rule", "text", "secret"), CASES)
def test_each_rule_replaces_its_secret_with_a_named_placeholder(rule: str, text: str, secret: str) -> None:
    clean, findings = redact_text(text, "f")
    assert secret not in clean
    assert placeholder(rule) in clean
    assert rule in {f.rule for f in findings}
    assert all(f.where == "f" and len(f.fingerprint) == 12 for f in findings)


def test_a_label_stays_readable_around_the_replaced_secret() -> None:
    clean, _ = redact_text(f"aws_secret_access_key = {AWS_SECRET}", "f")
    assert clean == "aws_secret_access_key = [REDACTED:aws_secret_key]"
    clean, _ = redact_text("postgres://app:hunter2hunter@db.prod.net/app", "f")
    assert clean == "postgres://app:[REDACTED:url_password]@db.prod.net/app"


def test_what_follows_a_redacted_password_is_scanned_too() -> None:
    clean, findings = redact_text("redis://u:s3cretpass@10.0.0.5:6379", "f")
    assert clean == "redis://u:[REDACTED:url_password]@[REDACTED:private_ip]:6379"
    assert sorted(f.rule for f in findings) == ["private_ip", "url_password"]


def test_documentation_placeholders_and_code_are_kept() -> None:
    kept = [
        "AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # AWS's documented examples
        "mail bob@example.com or ops@docs.example.org",
        "postgres://user:pass@example.org/db postgres://u:${DB_PASSWORD}@db.prod.net/x",
        "git clone git@github.com:org/repo.git",
        "_local = threading.local()  # self.local and os.environ are code",
        "public 8.8.8.8, version 10.2.3.4.5, 1.10.0.0.1",
        "Bearer of bad news",
    ]
    for text in kept:
        assert redact_text(text, "f") == (text, []), text


def test_a_secret_inside_a_kept_example_is_still_caught() -> None:
    clean, findings = redact_text(f"http://u:{AWS_KEY}@example.com git@gitlab.corp:team/app", "f")
    assert AWS_KEY not in clean and "gitlab.corp" not in clean
    assert sorted(f.rule for f in findings) == ["aws_access_key", "internal_host"]


def test_a_finding_carries_a_fingerprint_never_the_secret() -> None:
    _, findings = redact_text(f"{AWS_KEY} {PRIVATE_KEY}", "f")
    for finding in findings:
        assert AWS_KEY not in repr(finding) and "MIIEow" not in repr(finding)
    same, _ = redact_text(AWS_KEY, "g")
    assert findings[0].fingerprint == redact_text(AWS_KEY, "g")[1][0].fingerprint and same


def test_a_patch_keeps_its_context_lines_and_reports_them() -> None:
    diff = (
        "--- a/settings.py\n+++ b/settings.py\n@@ -1,2 +1,2 @@\n"
        " DB_HOST = 'db.internal'\n-KEY = 'old'\n+KEY = '" + AWS_KEY + "'\n"
    )
    clean, findings = redact_patch(diff, "task.expected_patch")
    assert " DB_HOST = 'db.internal'\n" in clean  # must still match the repository
    assert AWS_KEY not in clean and "+KEY = '[REDACTED:aws_access_key]'\n" in clean
    assert {(f.rule, f.where) for f in findings} == {
        ("internal_host", "task.expected_patch (kept: context line)"),
        ("aws_access_key", "task.expected_patch"),
    }


def test_a_record_is_walked_with_field_paths() -> None:
    record = {"steps": [{"observation": "ok"}, {"observation": f"key {AWS_KEY}", "n": 3}], "id": 7}
    clean, findings = redact_record(record, "trajectory")
    assert clean["steps"][1] == {"observation": "key [REDACTED:aws_access_key]", "n": 3} and clean["id"] == 7
    assert [f.where for f in findings] == ["trajectory.steps[1].observation"]


def test_configured_suffixes_and_patterns_apply(tmp_path: Path) -> None:
    patterns = tmp_path / "patterns.txt"
    patterns.write_text("# employee ids\nemployee_id = \\bEMP-\\d{6}\\b\nproject = (?i:project-falcon)\n")
    redactor = Redactor(host_suffixes=["acme"], extra=load_patterns(patterns))
    clean, findings = redact_text("EMP-123456 on build.acme for Project-Falcon; db.internal", "f", redactor=redactor)
    assert clean == "[REDACTED:employee_id] on [REDACTED:internal_host] for [REDACTED:project]; db.internal"
    assert redact_text(clean, "f", redactor=redactor) == (clean, [])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("no equals sign", "expected `name = regex`"),
        ("x = (unclosed", "missing )"),
        ("x = a*", "matches the empty string"),
        ("x = (?P<name>a)", "named groups"),
        ("x = (?i)abc", "flags must be scoped"),
    ],
)
def test_a_bad_pattern_file_is_a_one_line_error(tmp_path: Path, line: str, message: str) -> None:
    patterns = tmp_path / "p.txt"
    patterns.write_text(line + "\n")
    with pytest.raises(RedactionConfigError, match=re.escape(message)) as info:
        Redactor(extra=load_patterns(patterns))
    assert "\n" not in str(info.value)


# Property tests: bounded, so the whole file stays well under a few seconds.
_UPPER_DIGITS = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16)
_BASE64 = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", min_size=16, max_size=64)
_SEPARATORS = st.sampled_from([" ", "\n", "=", ":", "'", '"', "(", ",", "\t", "/"])
_NOISE = st.lists(
    st.sampled_from([*"abcxyz019 .-_@:/\n[]=AKI", "[REDACTED:email]", "db.internal", "Bearer "]), max_size=20
).map("".join)
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(prefix=_NOISE, sep1=_SEPARATORS, body=_UPPER_DIGITS, sep2=_SEPARATORS, suffix=_NOISE)
def test_a_generated_aws_key_never_survives(prefix: str, sep1: str, body: str, sep2: str, suffix: str) -> None:
    key = "AKIA" + body
    clean, findings = redact_text(prefix + sep1 + key + sep2 + suffix, "f")
    assert key not in clean
    assert findings
    assert all(key not in f.where and key not in f.fingerprint for f in findings)


@PROPERTY
@given(
    prefix=_NOISE,
    kind=st.sampled_from(["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", ""]),
    lines=st.lists(_BASE64, min_size=1, max_size=6),
    terminated=st.booleans(),
    suffix=_NOISE,
)
def test_a_private_key_body_never_survives(
    prefix: str, kind: str, lines: list[str], terminated: bool, suffix: str
) -> None:
    block = f"-----BEGIN {kind}PRIVATE KEY-----\n" + "\n".join(lines)
    if terminated:
        block += f"\n-----END {kind}PRIVATE KEY-----"
    clean, _ = redact_text(prefix + "\n" + block + "\n" + suffix, "f")
    for line in lines:
        assert line not in clean


_PIECES = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(
        [
            AWS_KEY,
            f"aws_secret_access_key={AWS_SECRET}",
            PRIVATE_KEY,
            "postgres://u:pw12345@10.1.1.1/x",
            "http://u:p@example.org",
            "jane@mailhost.io",
            "db1.corp",
            "Authorization: Bearer abcdefghijklmnop1234",
            "ghp_" + "x" * 36,
            "[REDACTED:aws_access_key]",
            "AKIAIOSFODNN7EXAMPLE",
        ]
    ),
)
# Anything glued to anything: redaction must still reach a fixed point.
_TEXT_WITH_SECRETS = st.lists(st.one_of(_PIECES, _SEPARATORS), max_size=12).map("".join)
# Secrets apart from their neighbours (two secrets glued into one token are one token).
_GAPS = st.sampled_from([" ", "\n", "\t", "'", '"', ",", "(", "; "])
_SEPARATED = st.lists(st.tuples(_PIECES, _GAPS), max_size=8).map(lambda ps: "".join(p + s for p, s in ps))


@PROPERTY
@given(text=_TEXT_WITH_SECRETS)
@example(text="http://u:[REDACTED:url_password]@db1.corp")
def test_redacting_twice_changes_nothing_more(text: str) -> None:
    once, _ = redact_text(text, "f")
    twice, findings = redact_text(once, "f")
    assert twice == once
    assert findings == []


@PROPERTY
@given(text=_SEPARATED)
def test_placeholders_never_hold_the_secret(text: str) -> None:
    clean, _ = redact_text(text, "f")
    for secret in (AWS_KEY, AWS_SECRET, "MIIEowIBAAKCAQEAu1SU1", "pw12345", "jane@mailhost.io", "x" * 36):
        assert secret not in clean


def test_the_rules_version_is_the_same_in_every_process() -> None:
    # Exports skip what was redacted under the same version: a hash seed must not change it.
    import subprocess
    import sys

    script = "from core import redaction; print(redaction.rules_version())"
    versions = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env={"PYTHONHASHSEED": seed}, check=True
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(versions) == 1
