"""The rules core.redaction applies: what each kind of secret looks like, and what is kept.

Plain Python, like core.redaction, which builds its scan from these (see its docstring for how
a rule's parts are used). A rule is data: its name, its pattern, and the literals without which
it cannot match; the host-name rule is built from the configured suffixes, and extra rules are
read from a file of `name = regex` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOST_SUFFIXES = ("internal", "corp", "local", "lan", "intranet", "home.arpa")
PLACEHOLDER_RE = r"\[REDACTED:[a-z0-9_]{1,40}\]"
RULE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Documented example credentials and domains: see core.redaction's docstring for why they stay.
EXAMPLE_SECRETS = frozenset({"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})
EXAMPLE_DOMAIN_RE = re.compile(r"(?:^|\.)(?:example\.(?:com|net|org)|example|test|invalid|localhost)$", re.IGNORECASE)
VARIABLE_SECRET_RE = re.compile(r"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{[A-Za-z_][A-Za-z0-9_]*\}|\*+|<[^>]*>)$")


class RedactionConfigError(ValueError):
    """A configured pattern that cannot be used; the message names the line."""


@dataclass(frozen=True)
class Rule:
    """One kind of secret: its pattern and the literals without which it cannot match.

    A group named `v` in the pattern is the secret itself (only it is replaced, so a label
    such as `aws_secret_access_key =` or `Bearer` stays and the text still reads); without
    one, the whole match is. A group named `host` is what the kept examples are judged by.
    Triggers are literals, one of which every match contains, lead included (`lower` ones are
    looked for in the lowercased text), or a `trigger_re` that finds every match: a string
    holding none of a rule's triggers is scanned without it, and a string holding no rule's
    trigger is not scanned at all. A rule without triggers (an extra one) is always scanned.
    A trigger_re may look past a string's ends only to refuse characters other than NUL, so that
    it finds a string's trigger just as well in that string joined to others by NULs (a Scope).
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
        lead="@",
        # An "@" between two characters an address can have there: not a decorator, a diff's
        # "@@" hunk header or a shell's "$@", which are most of the "@" in code.
        trigger_re=r"@(?<=[A-Za-z0-9._%+-]@)[A-Za-z0-9]",
    ),
    Rule(
        "private_ip",
        rf"(?<![\w.])(?:10(?:\.{_OCTET}){{3}}|172\.(?:1[6-9]|2\d|3[01])(?:\.{_OCTET}){{2}}|192\.168(?:\.{_OCTET}){{2}})"
        r"(?!\w|\.\d)",
        # The first octet where a number begins: "test_10.py" and "3.10.4" hold no address.
        trigger_re=r"1(?<![\w.]1)(?:0|72|92\.168)\.",
    ),
)


def host_rule(suffixes: Iterable[str]) -> Rule:
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


def check_extra(name: str, pattern: str) -> None:
    if "(?P<" in pattern:
        raise RedactionConfigError(f"redaction pattern {name!r}: named groups are not allowed (use plain groups)")
    try:
        compiled = re.compile(f"(?:{pattern})")
    except re.error as exc:
        raise RedactionConfigError(f"redaction pattern {name!r}: {exc} (flags must be scoped: (?i:...))") from None
    if compiled.fullmatch(""):
        raise RedactionConfigError(f"redaction pattern {name!r} matches the empty string")
