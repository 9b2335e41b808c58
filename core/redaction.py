"""Redaction of secrets, internal host names and personal data before data leaves for training.

Plain Python. One choke point used on import (task statements, snapshots, observations,
patches) and again on export, so data that entered before a rule existed is still caught.

Interface (stable; the rules behind it grow):
- `redact_text(text, where)` -> `(clean_text, findings)`
- `redact_record(record, where)` -> `(clean_record, findings)`, walking every string in a
  JSON-like value; `where` names the field path prefix ("trajectory.steps[3].observation").
- `redact_patch(diff, where)`: a unified diff keeps its context and removed lines (they are
  copies of the repository the task runs on, and a changed one no longer applies); only what
  the patch adds is redacted, what the others hold is reported as found.
A `Finding` names the rule, where it was and a short fingerprint of the match, never the
matched text itself: the audit log must not become the place secrets are kept.

How it works: the rules are alternatives of one compiled pattern, so a string is scanned once
whatever the number of rules; a rule whose trigger literals (`AKIA`, `://`, `.internal`) are
absent from the string is left out of that pattern (compiled once per combination and kept).
A match is replaced by `[REDACTED:<rule>]`; for rules that match a secret with its label
(`aws_secret_access_key = ...`, `Bearer ...`, `user:password@host`) only the secret is
replaced, so the text still reads. A placeholder is itself an alternative and is left alone,
and a string with findings is scanned again until nothing more is found: redacting twice
changes nothing. Measured by `python -m bench.redaction`.

Known over-redaction, accepted: Python's `a@b.cc` without spaces reads as an address, and a
file or module name ending in an internal suffix (`deploy.local`) as a host; imports
(`from pkg.local import`), calls (`threading.local()`) and attributes (`self.local`) are not.

What is deliberately kept (documentation placeholders, not secrets):
- AWS's own documented example credentials (`AKIAIOSFODNN7EXAMPLE` and its secret): public,
  shown in every AWS tutorial, and keeping them keeps code that configures boto readable.
- Emails and URL passwords at reserved documentation domains (RFC 2606: example.com/.net/.org,
  *.example, *.test, *.invalid, localhost) and `git@host:` remote addresses.
- A URL password that is a variable (`$DB_PASSWORD`, `${PASS}`, `{password}`) or all `*`.

Configuration (the Django side calls `configure` once at start-up, from settings):
host-name suffixes counted as internal, and extra patterns read from a file, one per line as
`name = regex` (`#` starts a comment). A pattern may use numbered groups and scoped flags
(`(?i:...)`), not named groups or global flags.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BUILTIN_RULES",
    "DEFAULT_HOST_SUFFIXES",
    "Finding",
    "RedactionConfigError",
    "Redactor",
    "Rule",
    "configure",
    "load_patterns",
    "placeholder",
    "redact_patch",
    "redact_record",
    "redact_text",
    "rules_version",
]

DEFAULT_HOST_SUFFIXES = ("internal", "corp", "local", "lan", "intranet", "home.arpa")
PLACEHOLDER_RE = r"\[REDACTED:[a-z0-9_]{1,40}\]"
# Bump when the code around the patterns changes what is redacted (kept examples, passes).
MODULE_RULES_REVISION = 1
MAX_PASSES = 8  # far more than real text needs (one; two when secrets touch)
RULE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Documented example credentials and domains: see the module docstring for why they stay.
EXAMPLE_SECRETS = frozenset({"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})
EXAMPLE_DOMAIN_RE = re.compile(r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.IGNORECASE)
VARIABLE_SECRET_RE = re.compile(r"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{[A-Za-z_][A-Za-z0-9_]*\}|\*+|<[^>]*>)$")


@dataclass(frozen=True)
class Finding:
    rule: str  # e.g. "aws_access_key", "private_key_block", "internal_host", "email"
    where: str  # field path, e.g. "task.statement" or "trajectory.steps[2].observation"
    fingerprint: str  # first 12 hex of sha256 of the match: lets two findings be matched up


class RedactionConfigError(ValueError):
    """A configured pattern that cannot be used; the message names the line."""


def placeholder(rule: str) -> str:
    return f"[REDACTED:{rule}]"


def fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@dataclass(frozen=True)
class Rule:
    """One kind of secret: its pattern and the literals without which it cannot match.

    A group named `v` in the pattern is the secret itself (only it is replaced, so a label
    such as `aws_secret_access_key =` or `Bearer` stays and the text still reads); without
    one, the whole match is. A group named `host` is what `_kept` looks at. Triggers are
    literals, one of which every match contains (`lower` ones are looked for in the
    lowercased text): a string holding none of a rule's triggers is scanned without it,
    which is what keeps the scan near the speed of one regex instead of twenty.
    """

    name: str
    pattern: str
    triggers: tuple[str, ...] = ()
    lower: tuple[str, ...] = ()
    word_start: bool = True  # a match can only begin where a word begins
    # A first character every match starts with, kept outside the rule's group: when every
    # active rule has one, the regex engine skips ahead to those characters in C instead of
    # trying each position (4x faster on code with emails and URLs about).
    lead: str = ""
    trigger_re: str = ""  # a cheap pattern to search for instead of literals


_BASE64_LINE = r"[A-Za-z0-9+/=]{1,120}"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
# Order matters where two rules could start at the same place: the first alternative wins,
# so longer, more specific shapes come first. Rules that only recognise a secret by its label
# look for the label, since 40 base64 characters alone could be anything.
BUILTIN_RULES: tuple[Rule, ...] = (
    Rule(
        "private_key_block",
        # An unterminated block (a truncated observation) still loses its body: the header
        # lines and base64 lines that follow, up to the first line that is neither.
        r"----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        # The body stops at another BEGIN: a run of headers without ends costs linear time.
        r"(?:(?:(?!-----BEGIN)[\s\S]){0,20000}?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
        rf"|(?:\r?\n(?:{_BASE64_LINE}|[A-Za-z-]{{1,40}}: [^\r\n]{{0,200}})?)*)",
        triggers=("PRIVATE KEY",),
        lead="-",
    ),
    Rule(
        "url_password",
        # From "://" on: the scheme says nothing about the password, and starting at a literal
        # is what keeps this rule cheap where no URL is.
        r"//[^\s:/?#@\"'<>\[\]]{1,256}:(?P<v>[^\s/?#@\"'<>]{1,256})@(?P<host>[A-Za-z0-9.-]{1,253})",
        triggers=("://",),
        lead=":",
    ),
    Rule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", triggers=("eyJ",)),
    Rule(
        "aws_access_key",
        # No boundaries: a key glued to a name (AWS_KEY_AKIA..., 0AKIA...) is still a key, and
        # twenty capitals and digits starting so are hardly ever anything else.
        r"(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}",
        triggers=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        lead="A",
    ),
    Rule(
        "aws_secret_key",
        r"(?i:aws_?secret(?:_?access)?_?key|secret_?access_?key)[\"']?\s{0,5}[:=]\s{0,5}[\"']?"
        r"(?P<v>[A-Za-z0-9/+=]{16,200})(?![A-Za-z0-9/+=])",  # labelled: any length is a secret
        lower=("secret",),
        word_start=False,  # MY_AWS_SECRET_ACCESS_KEY= labels a secret just as well
    ),
    Rule(
        "github_token",
        r"(?:h[pousr]_[A-Za-z0-9]{36,255}|ithub_pat_[A-Za-z0-9_]{22,255})",
        triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        lead="g",  # the prefix is distinctive enough to find glued to anything
    ),
    Rule("slack_token", r"ox[abposr]-[A-Za-z0-9-]{10,250}", triggers=("xox",), lead="x"),
    Rule(
        "slack_token",
        r"ttps://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,200}",
        triggers=("hooks.slack.com",),
        lead="h",
    ),
    Rule("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,250}", triggers=("sk-",)),
    Rule("crucible_token", r"\bcrc_[A-Za-z0-9_-]{30,60}", triggers=("crc_",)),
    Rule("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,60}", triggers=("glpat-",)),
    Rule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", triggers=("AIza",)),
    Rule(
        "bearer_token",
        r"(?:(?i:\bbearer)|(?i:\bauthorization)[\"']?\s{0,5}[:=]\s{0,5}[\"']?(?:Basic|Token|token|basic))"
        r"\s{1,5}(?P<v>[A-Za-z0-9._~+/-]{16,2000}=*)(?![A-Za-z0-9._~+/=-])",
        lower=("bearer", "authorization"),
    ),
    Rule(
        "email",
        # From the "@" on: the local part is found by looking back from it (Redactor._email).
        # Scanning every word of code for a following "@" cost more than all other rules.
        r"(?<=[A-Za-z0-9._%+-]@)(?P<host>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})\b",
        triggers=("@",),
        lead="@",
    ),
    Rule(
        "private_ip",
        rf"(?<![\w.])(?:10(?:\.{_OCTET}){{3}}|172\.(?:1[6-9]|2\d|3[01])(?:\.{_OCTET}){{2}}|192\.168(?:\.{_OCTET}){{2}})"
        r"(?!\w|\.\d)",
        triggers=("10.", "172.", "192.168."),
    ),
)


def _host_rule(suffixes: Iterable[str]) -> Rule:
    # Longest first (a regex takes the first alternative that fits), then by name: the same
    # pattern, and so the same rules version, in every process whatever its hash seed.
    names = sorted({s.strip(".").lower() for s in suffixes}, key=lambda name: (-len(name), name))
    alternatives = "|".join(re.escape(n) for n in names)
    # Not followed by "(" or a word character: `threading.local()` and `self.local_x` are code.
    # Not preceded by "." or a word: the whole dotted name is the host, not its tail.
    return Rule(
        "internal_host",
        # Python says `from pkg.local import x` and `Backend.LOCAL`: a module path is no host,
        # and a host's suffix is written in lower case.
        r"(?<![\w.-])(?<!import )(?!(?:self|cls|this|threading|os|sys)\.)"
        rf"(?i:(?:[a-z0-9_](?:[a-z0-9_-]{{0,61}}[a-z0-9])?\.)+)(?:{alternatives})(?![\w(-]|\.\w)"
        # `from pkg.local import x` names a module; "connect from db1.prod.corp." names a host.
        r"(?![ \t]+import\b)",
        # ".lan" is in every ".language": ask for the suffix as a whole word.
        trigger_re=rf"\.(?:{alternatives})(?![\w(-])",
    )


def load_patterns(path: Path) -> list[tuple[str, str]]:
    """Extra rules from a file of `name = regex` lines; a bad line is a one-line error."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RedactionConfigError(f"redaction patterns {path}: cannot read ({exc.strerror})") from None
    rules: list[tuple[str, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, pattern = line.partition("=")
        name, pattern = name.strip(), pattern.strip()
        if not sep or not RULE_NAME_RE.match(name) or not pattern:
            raise RedactionConfigError(f"redaction patterns {path}:{lineno}: expected `name = regex` (name: a-z0-9_)")
        rules.append((name, pattern))
    return rules


def _check_extra(name: str, pattern: str) -> None:
    if "(?P<" in pattern:
        raise RedactionConfigError(f"redaction pattern {name!r}: named groups are not allowed (use plain groups)")
    try:
        compiled = re.compile(f"(?:{pattern})")
    except re.error as exc:
        raise RedactionConfigError(f"redaction pattern {name!r}: {exc} (flags must be scoped: (?i:...))") from None
    if compiled.fullmatch(""):
        raise RedactionConfigError(f"redaction pattern {name!r} matches the empty string")


class Redactor:
    """One set of rules. Built once; `redact` is safe to call from any thread."""

    CACHE = 256  # compiled combinations of rules kept (real text uses a handful)

    def __init__(
        self, host_suffixes: Iterable[str] = DEFAULT_HOST_SUFFIXES, extra: Iterable[tuple[str, str]] = ()
    ) -> None:
        rules = list(BUILTIN_RULES)
        suffixes = [s for s in host_suffixes if s.strip(".")]
        if suffixes:
            rules.append(_host_rule(suffixes))
        for name, pattern in extra:
            _check_extra(name, pattern)
            rules.append(Rule(name, f"(?:{pattern})", word_start=False))
        self.rules = tuple(rules)
        self.rule_names = tuple(rule.name for rule in rules)
        # What the rules are, in one short name: data redacted under these exact rules need not
        # be scanned again (an export of trajectories redacted on import under the same rules).
        canonical = "\n".join(f"{r.name}\0{r.pattern}\0{r.trigger_re}" for r in rules)
        self.version = hashlib.sha256(f"{MODULE_RULES_REVISION}\n{canonical}".encode()).hexdigest()[:16]
        self._groups: dict[str, tuple[str, str | None, str | None]] = {}
        self._parts: list[str] = []
        for index, rule in enumerate(rules):
            group = f"r{index}"
            value = f"{group}_v" if "(?P<v>" in rule.pattern else None
            host = f"{group}_host" if "(?P<host>" in rule.pattern else None
            pattern = rule.pattern.replace("(?P<v>", f"(?P<{group}_v>").replace("(?P<host>", f"(?P<{group}_host>")
            self._parts.append(f"{re.escape(rule.lead)}(?P<{group}>{pattern})")
            self._groups[group] = (rule.name, value, host)
        self._compiled: dict[tuple[int, ...], re.Pattern[str]] = {}
        self._trigger_res = {i: re.compile(rule.trigger_re) for i, rule in enumerate(rules) if rule.trigger_re}
        self._pattern(tuple(range(len(rules))))  # every rule at once: a bad combination fails here

    def _active(self, text: str) -> tuple[int, ...]:
        lowered: str | None = None
        active: list[int] = []
        for index, rule in enumerate(self.rules):
            trigger = self._trigger_res.get(index)
            if trigger is not None:
                if trigger.search(text):
                    active.append(index)
            elif rule.lead or (not rule.triggers and not rule.lower):
                # A led rule costs a C-level skip to its first character: looking for its
                # triggers first would cost more than it saves.
                active.append(index)
            elif any(t in text for t in rule.triggers):
                active.append(index)
            elif rule.lower:
                lowered = text.lower() if lowered is None else lowered
                if any(t in lowered for t in rule.lower):
                    active.append(index)
        return tuple(active)

    def _pattern(self, active: tuple[int, ...]) -> re.Pattern[str]:
        compiled = self._compiled.get(active)
        if compiled is None:
            # Most positions are inside a word, where no word-start rule can begin: one
            # look-behind there stands in for trying each of those rules in turn.
            led = [self._parts[i] for i in active if self.rules[i].lead]
            anywhere = [self._parts[i] for i in active if not self.rules[i].lead and not self.rules[i].word_start]
            at_word = [self._parts[i] for i in active if not self.rules[i].lead and self.rules[i].word_start]
            branches = [f"\\[(?P<_placeholder>{PLACEHOLDER_RE[2:]})", *led, *anywhere]
            if at_word:
                branches.append("(?<!\\w)(?:" + "|".join(at_word) + ")")
            compiled = re.compile("|".join(branches))
            if len(self._compiled) >= self.CACHE:
                self._compiled.clear()
            self._compiled[active] = compiled
        return compiled

    def redact(self, text: str, where: str) -> tuple[str, list[Finding]]:
        findings: list[Finding] = []
        if not text:
            return text, findings
        # A replacement changes what borders it (`a@b.cc` + key + `[` now ends an address), so
        # a text with findings is scanned again until a pass finds nothing: that is what makes
        # redacting twice a no-op. Each pass turns secret text into placeholders, so it ends.
        for _ in range(MAX_PASSES):
            before = len(findings)
            text = self._sub(text, where, findings)
            if len(findings) == before:
                break
        return text, findings

    def _sub(self, text: str, where: str, findings: list[Finding]) -> str:
        active = self._active(text)
        if not active:
            return text
        out: list[str] = []
        last = 0
        for match in self._pattern(active).finditer(text):
            start = match.start()
            if match.lastgroup is not None and self._groups.get(match.lastgroup, ("",))[0] == "email":
                out.append(text[last : _local_start(text, start, last)])
                out.append(self._email(text[_local_start(text, start, last) : match.end()], where, findings))
            else:
                out.append(text[last:start])
                out.append(self._replace(match, where, findings))
            last = match.end()
        out.append(text[last:])
        return "".join(out)

    def _email(self, whole: str, where: str, findings: list[Finding]) -> str:
        """`whole` is local@host, or @host when nothing before the "@" can be an address."""
        at = whole.index("@")
        local, host = whole[:at], whole[at + 1 :]
        if not local or whole.startswith("git@") or EXAMPLE_DOMAIN_RE.search(host):
            # Not an address, a git remote or a documentation one: its parts may still hold
            # something (a key as the local part, an internal host).
            return self._sub(local, where, findings) + "@" + self._sub(host, where, findings)
        findings.append(Finding("email", where, fingerprint(whole)))
        return placeholder("email")

    def _replace(self, match: re.Match[str], where: str, findings: list[Finding]) -> str:
        group = match.lastgroup
        whole = match.group(0)
        if group is None or group == "_placeholder":
            return whole
        name, value_group, host_group = self._groups[group]
        start, end = match.span()
        if value_group is not None and match.group(value_group) is not None:
            start, end = match.span(value_group)
        text = match.string
        secret = text[start:end]
        before, after = text[match.start() : start], text[end : match.end()]
        # What a match holds besides its secret (a URL's host, an email's parts) is scanned
        # again on its own: a key kept inside an example URL, or a private address after a
        # redacted password, must not ride through on the larger match.
        if _kept(name, secret, match.group(host_group) if host_group else None, whole):
            if (start, end) == match.span():
                return whole
            return "".join(self._sub(part, where, findings) for part in (before, secret, after))
        findings.append(Finding(name, where, fingerprint(secret)))
        return self._sub(before, where, findings) + placeholder(name) + self._sub(after, where, findings)


_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_LOCAL_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _local_start(text: str, at: int, floor: int) -> int:
    """Where the local part of an address ending just before `at` begins (`at` when none).

    At most 64 characters back, never before `floor` (the end of the previous match).
    """
    start = at
    while start > floor and at - start < 64 and text[start - 1] in _LOCAL:
        start -= 1
    while start < at and text[start] not in _LOCAL_FIRST:
        start += 1
    return start


def _kept(rule: str, secret: str, host: str | None, whole: str) -> bool:
    """A documentation placeholder, or what is already redacted: see the module docstring."""
    if "[REDACTED:" in secret or secret in EXAMPLE_SECRETS:
        return True
    if rule == "url_password":
        return (host is not None and EXAMPLE_DOMAIN_RE.search(host) is not None) or bool(
            VARIABLE_SECRET_RE.match(secret)
        )
    return False


_default = Redactor()


def configure(host_suffixes: Iterable[str] | None = None, patterns_file: Path | None = None) -> Redactor:
    """Replace the rules `redact_text` and `redact_record` use (called once from settings)."""
    global _default
    extra = load_patterns(patterns_file) if patterns_file is not None else []
    _default = Redactor(DEFAULT_HOST_SUFFIXES if host_suffixes is None else tuple(host_suffixes), extra)
    return _default


def rules_version() -> str:
    """The version of the rules in force (see Redactor.version)."""
    return _default.version


def redact_text(text: str, where: str, *, redactor: Redactor | None = None) -> tuple[str, list[Finding]]:
    return (redactor or _default).redact(text, where)


def redact_patch(diff: str, where: str, *, redactor: Redactor | None = None) -> tuple[str, list[Finding]]:
    """Redact what a unified diff adds; report, but keep, what its other lines hold.

    Context and removed lines must match the repository the patch applies to, so changing
    them breaks the patch; they are copies of that repository, which is stored as it came.
    """
    active = redactor or _default
    out: list[str] = []
    findings: list[Finding] = []
    # Lines as patch tools see them: split on "\n" only (splitlines would also cut at a form
    # feed, and the tail of an added line would pass for a context line).
    for line in diff.split("\n"):
        # "+++ b/path" headers count as added: a path only changes if it holds a secret.
        if line.startswith("+"):
            clean, found = active.redact(line, where)
            out.append(clean)
            findings.extend(found)
            continue
        _, found = active.redact(line, where)
        findings.extend(Finding(f.rule, f"{f.where} (kept: context line)", f.fingerprint) for f in found)
        out.append(line)
    return "\n".join(out), findings


def redact_record(record: Any, where: str, *, redactor: Redactor | None = None) -> tuple[Any, list[Finding]]:
    if isinstance(record, str):
        return redact_text(record, where, redactor=redactor)
    if isinstance(record, dict):
        findings: list[Finding] = []
        out_dict: dict[Any, Any] = {}
        for key, value in record.items():
            out_dict[key], found = redact_record(value, f"{where}.{key}" if where else str(key), redactor=redactor)
            findings.extend(found)
        return out_dict, findings
    if isinstance(record, list):
        findings = []
        out_list: list[Any] = []
        for index, value in enumerate(record):
            clean, found = redact_record(value, f"{where}[{index}]", redactor=redactor)
            out_list.append(clean)
            findings.extend(found)
        return out_list, findings
    return record, []
