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
- `default().scope(texts)` -> a `Scope`, taken by the three above as `redactor=`: the same
  results for any of `texts` (a record's, `strings(value)` for a JSON value), scanned together.
A `Finding` names the rule, where it was and a short fingerprint of the match, never the
matched text itself: the audit log must not become the place secrets are kept.

How it works: the rules are alternatives of one compiled pattern, so a string is scanned once
whatever the number of rules. Before that, each rule's trigger literals (`AKIA`, `://`,
`.internal`) are looked for: a rule whose triggers are absent is left out of the pattern
(compiled once per combination and kept), and a string holding no trigger at all, most of
what agents print, is not scanned. A `Scope` looks for the triggers once in many strings
joined (a whole record's): a string then checks only the rules that can fire somewhere in them,
none when nothing can. A match is replaced by `[REDACTED:<rule>]`; for rules that match a
secret with its label (`aws_secret_access_key = ...`, `Bearer ...`, `user:password@host`) only
the secret is replaced, so the text still reads. A placeholder is itself an alternative and is
left alone, and a string with findings is scanned again until nothing more is found: redacting
twice changes nothing. Measured by `python -m bench.redaction`.

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
(`(?i:...)`), not named groups or global flags. The rules themselves are in
core/redaction_rules.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.redaction_rules import (
    BUILTIN_RULES,
    DEFAULT_HOST_SUFFIXES,
    EXAMPLE_DOMAIN_RE,
    EXAMPLE_SECRETS,
    PLACEHOLDER_RE,
    VARIABLE_SECRET_RE,
    RedactionConfigError,
    Rule,
    check_extra,
    host_rule,
    load_patterns,
)

__all__ = [
    "BUILTIN_RULES",
    "DEFAULT_HOST_SUFFIXES",
    "EXAMPLE_DOMAIN_RE",
    "VARIABLE_SECRET_RE",
    "Finding",
    "RedactionConfigError",
    "Redactor",
    "Rule",
    "Scope",
    "configure",
    "default",
    "load_patterns",
    "placeholder",
    "redact_patch",
    "redact_record",
    "redact_text",
    "rules_version",
    "strings",
]

# Bump when the code around the patterns changes what is redacted (kept examples, passes).
MODULE_RULES_REVISION = 1
MAX_PASSES = 8  # far more than real text needs (one; two when secrets touch)
# Strings a Scope joins are kept apart by a character no trigger holds, and no word character
# (a trigger_re refusing one at a string's end refuses nothing more): every trigger of a string
# is found in the joined text, and a false one (two strings' ends together) costs one check.
SCOPE_SEPARATOR = "\x00"


@dataclass(frozen=True)
class Finding:
    rule: str  # e.g. "aws_access_key", "private_key_block", "internal_host", "email"
    where: str  # field path, e.g. "task.statement" or "trajectory.steps[2].observation"
    fingerprint: str  # first 12 hex of sha256 of the match: lets two findings be matched up


def placeholder(rule: str) -> str:
    return f"[REDACTED:{rule}]"


def fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# How the scan finds out whether a rule can fire in a string: (rule index, its one literal, a
# search for its literals or its trigger_re, its lowercase literals); none of these is a rule
# that is always scanned.
Check = tuple[int, str, Callable[[str], object] | None, tuple[str, ...]]


def _check(index: int, rule: Rule) -> Check:
    if rule.trigger_re:
        return index, "", re.compile(rule.trigger_re).search, ()
    if len(rule.triggers) == 1:
        return index, rule.triggers[0], None, rule.lower
    # One search for several literals: when they share a first character (AKIA, ASIA, ...) the
    # regex engine skips to it in C, one pass where `in` would make one per literal.
    search = re.compile("|".join(map(re.escape, rule.triggers))).search if rule.triggers else None
    return index, "", search, rule.lower


class Redactor:
    """One set of rules. Built once; `redact` is safe to call from any thread."""

    CACHE = 256  # compiled combinations of rules kept (real text uses a handful)

    def __init__(
        self, host_suffixes: Iterable[str] = DEFAULT_HOST_SUFFIXES, extra: Iterable[tuple[str, str]] = ()
    ) -> None:
        rules = list(BUILTIN_RULES)
        suffixes = [s for s in host_suffixes if s.strip(".")]
        if suffixes:
            rules.append(host_rule(suffixes))
        for name, pattern in extra:
            check_extra(name, pattern)
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
        self._email_groups = frozenset(g for g, (name, _, _) in self._groups.items() if name == "email")
        self._checks = tuple(_check(index, rule) for index, rule in enumerate(rules))
        self._compiled: dict[tuple[int, ...], re.Pattern[str]] = {}
        self._pattern(tuple(range(len(rules))))  # every rule at once: a bad combination fails here

    def _active(self, text: str, among: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """The rules whose triggers `text` holds, of all or of `among` (a Scope's), in rule order."""
        checks = self._checks if among is None else [self._checks[i] for i in among]
        active: list[int] = []
        lowered: str | None = None
        for index, literal, search, lower in checks:
            if literal:
                if literal in text:
                    active.append(index)
                    continue
            elif search is not None:
                if search(text):
                    active.append(index)
                    continue
            elif not lower:
                active.append(index)
                continue
            if lower:
                if lowered is None:
                    lowered = text.lower()
                for word in lower:
                    if word in lowered:
                        active.append(index)
                        break
        return tuple(active)

    def scope(self, texts: Iterable[str], among: tuple[int, ...] | None = None) -> Scope:
        """The rules (of all, or of `among`) that can fire anywhere in `texts`, found in one scan of them joined."""
        return Scope(self, self._active(SCOPE_SEPARATOR.join(texts), among))

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
        active = self._active(text) if text else ()
        return self.redact_with(text, where, active) if active else (text, [])

    def redact_with(self, text: str, where: str, active: tuple[int, ...]) -> tuple[str, list[Finding]]:
        """`redact`, given the rules whose triggers `text` holds (`_active(text)`)."""
        findings: list[Finding] = []
        # A replacement changes what borders it (`a@b.cc` + key + `[` now ends an address), so
        # a text with findings is scanned again until a pass finds nothing: that is what makes
        # redacting twice a no-op. Each pass turns secret text into placeholders, so it ends.
        for _ in range(MAX_PASSES):
            before = len(findings)
            text = self._sub(text, where, findings, active)
            if len(findings) == before:
                break
            active = self._active(text)
        return text, findings

    def _sub(self, text: str, where: str, findings: list[Finding], active: tuple[int, ...] | None = None) -> str:
        if active is None:
            active = self._active(text)
        if not active:
            return text
        out: list[str] = []
        last = 0
        for match in self._pattern(active).finditer(text):
            start = match.start()
            if match.lastgroup in self._email_groups:
                local = _local_start(text, start, last)
                out.append(text[last:local])
                out.append(self._email(text[local : match.end()], where, findings))
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


class Scope:
    """A redactor's rules narrowed to those that can fire somewhere in a set of strings.

    `redact` gives exactly what the redactor gives for any of those strings or a line of one
    (a trigger a string holds is in them all joined); it only skips the checks, and for most
    records the scans, of rules that cannot fire.
    """

    __slots__ = ("among", "redactor")

    def __init__(self, redactor: Redactor, among: tuple[int, ...]) -> None:
        self.redactor = redactor
        self.among = among

    def __bool__(self) -> bool:
        return bool(self.among)

    def narrow(self, texts: Iterable[str]) -> Scope:
        """This scope's rules that can fire in some of `texts` (a part of what it was made from)."""
        return self.redactor.scope(texts, self.among) if self.among else self

    def redact(self, text: str, where: str) -> tuple[str, list[Finding]]:
        active = self.redactor._active(text, self.among) if self.among and text else ()
        return self.redactor.redact_with(text, where, active) if active else (text, [])


class Redacts(Protocol):
    """A Redactor or a Scope: what redact_text, redact_record and redact_patch take."""

    def redact(self, text: str, where: str) -> tuple[str, list[Finding]]: ...


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


def default() -> Redactor:
    """The redactor in force (see configure)."""
    return _default


def rules_version() -> str:
    """The version of the rules in force (see Redactor.version)."""
    return _default.version


def redact_text(text: str, where: str, *, redactor: Redacts | None = None) -> tuple[str, list[Finding]]:
    return (_default if redactor is None else redactor).redact(text, where)


def redact_patch(diff: str, where: str, *, redactor: Redacts | None = None) -> tuple[str, list[Finding]]:
    """Redact what a unified diff adds; report, but keep, what its other lines hold.

    Context and removed lines must match the repository the patch applies to, so changing
    them breaks the patch; they are copies of that repository, which is stored as it came.
    """
    active = _default if redactor is None else redactor
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


_TEXT_OR_CONTAINER = (str, dict, list)


def redact_record(record: Any, where: str, *, redactor: Redacts | None = None) -> tuple[Any, list[Finding]]:
    if isinstance(record, str):
        return redact_text(record, where, redactor=redactor)
    if isinstance(record, dict):
        findings: list[Finding] = []
        out_dict: dict[Any, Any] = {}
        for key, value in record.items():
            if isinstance(value, _TEXT_OR_CONTAINER):  # numbers, booleans and nulls hold no text
                value, found = redact_record(value, f"{where}.{key}" if where else str(key), redactor=redactor)
                findings.extend(found)
            out_dict[key] = value
        return out_dict, findings
    if isinstance(record, list):
        findings = []
        out_list: list[Any] = []
        for index, value in enumerate(record):
            if isinstance(value, _TEXT_OR_CONTAINER):
                value, found = redact_record(value, f"{where}[{index}]", redactor=redactor)
                findings.extend(found)
            out_list.append(value)
        return out_list, findings
    return record, []


def strings(value: Any) -> Iterator[str]:
    """Every string `redact_record` would redact in a JSON-like value (not the keys)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
