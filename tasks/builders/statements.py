"""Problem statements people would write, and a score of how close one comes. Plain Python.

A commit subject is not a statement: "DIV is Operator" is the fix itself, and a subject whose
issue reference was scrubbed reads "Add option to remove trailing semicolon (fixes )." So a
statement is composed from the cleaned commit message plus the behaviour the commit's tests
observe (what they are called, what they assert), and never carries a line of the expected
patch. `quality` scores the result so a person, a page or a validation threshold can use it.
"""

from __future__ import annotations

import re
from typing import TypedDict

from patches import PatchError, parse

# Issue and pull-request references: "#12", "gh-12", "owner/repo#12", an issues/pull URL.
REFERENCE = re.compile(
    r"(?:[\w.-]+/[\w.-]+)?#\d+|\b[Gg][Hh]-\d+\b|https?://\S+/(?:issues|pull|pulls)/\d+\S*|\b(?:PR|pr) ?#?\d+\b"
)
REFERENCE_WORD = r"(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?|see|refs?|issue|pr|pull request|gh|via|in)"
# What is left of "(fixes #12)", "[closes #3, #4]" or "(see )" once the references are gone.
# A bare "()" is code (`parse()`), so a shell holds a reference word or only blanks.
EMPTY_SHELL = re.compile(
    rf"[(\[]\s*(?:{REFERENCE_WORD}\b\s*[,;:&]?\s*|and\s+|,\s*)+[)\]]|\(\s+\)|\[\s+\]", re.IGNORECASE
)
# A bracket around nothing but references (marked \x00 while cleaning) and reference words.
REFERENCE_BRACKET = re.compile(rf"[(\[](?:\s|\x00|{REFERENCE_WORD}\b|and\b|[,;:&])*[)\]]", re.IGNORECASE)
# The hole a reference left inside a sentence: "the proposal in  as it ...".
INLINE_SHELL = re.compile(rf"\b{REFERENCE_WORD}[ \t]{{2,}}(?=[a-z])", re.IGNORECASE)
INTRODUCED_REFERENCE = re.compile(rf"(?:\b{REFERENCE_WORD}\s*)?\x00", re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")
DANGLING_WORD = re.compile(rf"\s*[,;:-]?\s*\b{REFERENCE_WORD}\s*[.:,]?\s*$", re.IGNORECASE)
# Trailers are for the tools that read the history, not for the person fixing the bug: the
# known ones anywhere, and a last paragraph made only of `Token: value` lines (git's own rule).
TRAILER = re.compile(r"^(?:Signed-off-by|Co-authored-by|Reviewed-by|Change-Id|Cherry-picked from)\b.*$", re.I | re.M)
TRAILER_LINE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:\s+\S")
TRAILER_KEYS = re.compile(r"-by$|^(?:fixes|closes|resolves|refs?|bug|issue|see-also|change-id|part-of)$", re.I)
HASHES = re.compile(r"\b[0-9a-f]{7,40}\b")
ASSERTION = re.compile(r"^\s*(?:assert\b|self\.assert\w*\(|pytest\.raises\(|with pytest\.raises\()")
TEST_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(")
# Paths a sandboxed run puts into messages: they differ run to run and mean nothing to a reader.
SANDBOX_PATH = re.compile(r"(?:/workspace|/tmp/crucible-[\w.-]+|/run/[0-9a-f]{16,})(?:/[\w.-]+)*")
MAX_BEHAVIOURS = 4
MAX_LINE = 160
MIN_LEAK = 20
WORDS_FOR_FULL_LENGTH = 40


class StatementQuality(TypedDict):
    score: float  # 0..1
    words: int
    names_behaviour: bool  # says what should happen: an assertion, an expected value, "should"
    empty_shells: list[str]
    leaks: list[str]  # lines of the expected patch found in the statement


def clean(text: str, title: bool = False) -> str:
    """References, the empty shells they leave behind, trailers and commit hashes removed.

    A reference inside a sentence leaves a hole nobody can fill ("simpler than the proposal in
    #810 as it ..."): in a body the sentence goes; in a title the reference and the word that
    introduced it go, since a title has nothing else to say.
    """
    text = TRAILER.sub("", REFERENCE.sub("\x00", _without_trailer_block(text)))
    text = HASHES.sub("<commit>", text)
    lines = []
    for line in text.splitlines():
        before = line
        line = REFERENCE_BRACKET.sub(lambda m: "" if "\x00" in m.group(0) else m.group(0), line)
        line = EMPTY_SHELL.sub("", line)
        if "\x00" in line:
            line = _without_inline_references(line, title)
        line = line.replace("\x00", "")
        if line != before and line.strip():
            # Only where a reference went: "in" ending a wrapped line of prose is the prose's.
            line = DANGLING_WORD.sub("", line)
        if title:
            # "Fix #218: handle None" lost "Fix #218": its colon must not lead the title.
            line = re.sub(r"^\s*[:;,.\-]+\s*", "", line)
            line = line[:1].upper() + line[1:]
        line = re.sub(r"(?<=\S)[ \t]+([.,;:!?])(?=\s|$)", r"\1", line).rstrip()
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _without_trailer_block(text: str) -> str:
    """The message without its last paragraph when that paragraph is trailers only."""
    paragraphs = text.rstrip().split("\n\n")
    last = [line for line in paragraphs[-1].splitlines() if line.strip()]
    if len(paragraphs) > 1 and last and all(TRAILER_LINE.match(line) for line in last):
        if any(TRAILER_KEYS.search(line.split(":", 1)[0]) for line in last):
            return "\n\n".join(paragraphs[:-1])
    return text


def _without_inline_references(line: str, title: bool) -> str:
    if title:
        return re.sub(r"\s{2,}", " ", INTRODUCED_REFERENCE.sub("", line))
    kept = []
    for sentence in SENTENCE_END.split(line):
        marker = sentence.rfind("\x00")
        if marker == -1:
            kept.append(sentence)
        elif not sentence[marker + 1 :].strip(" \t.,;:!?)]\x00"):
            # The reference ends its sentence ("Add x, see #12."): it goes with the word before it.
            body = sentence.rstrip(" \t.!?")
            kept.append(DANGLING_WORD.sub("", body.replace("\x00", "")) + sentence[len(body) :].strip())
    return " ".join(part.strip() for part in kept if part.strip(" .,;:!?"))


def humanise(test_name: str) -> str:
    """test_strip_trailing_semicolon -> "strip trailing semicolon": the behaviour, not the id."""
    words = re.sub(r"^test_?", "", test_name).replace("_", " ").strip()
    return re.sub(r"\s+", " ", words) or test_name


def behaviours(test_diff: str) -> list[tuple[str, list[str]]]:
    """(test, its added assertions) for each test function the diff adds or changes."""
    found: dict[str, list[str]] = {}
    current = ""
    lines = test_diff.splitlines()
    for at, line in enumerate(lines):
        if line.startswith(("+++", "---")):
            continue
        if line.startswith("@@"):
            header = TEST_DEF.search(line.split("@@")[-1])
            current = header.group(1) if header else ""
            continue
        body = line[1:] if line[:1] in "+ -" else line
        defined = TEST_DEF.match(body)
        if defined:
            current = defined.group(1)
            if line.startswith("+"):
                found.setdefault(current, [])
            continue
        if line.startswith("+") and current and ASSERTION.match(body):
            found.setdefault(current, []).append(_whole_statement(lines, at)[:MAX_LINE])
    return list(found.items())[:MAX_BEHAVIOURS]


def _whole_statement(lines: list[str], at: int) -> str:
    """The added statement starting at lines[at], joined over the lines its brackets stay open."""
    parts: list[str] = []
    depth = 0
    for line in lines[at : at + 30]:
        if parts and not line.startswith("+"):
            break
        body = line[1:].strip()
        parts.append(body)
        depth += sum(body.count(c) for c in "([{") - sum(body.count(c) for c in ")]}")
        if depth <= 0 and not body.endswith("\\"):
            break
    joined = " ".join(part.rstrip("\\").strip() for part in parts)
    return re.sub(r"([(\[{])\s+", r"\1", re.sub(r"\s+([)\]}])", r"\1", joined))


def compose(subject: str, body: str, test_diff: str, expected_patch: str) -> str:
    """A statement from the commit message and what the commit's tests observe, with no patch line in it."""
    title = clean(subject, title=True) or "Fix a bug"
    text = f"# {title}\n"
    details = clean(body)
    if details:
        text += f"\n{details}\n"
    added = patch_lines(expected_patch)
    lines = []
    for name, assertions in behaviours(test_diff):
        shown = "; ".join(f"`{a}`" for a in assertions[:2] if not any(line in a for line in added))
        lines.append(f"- {humanise(name)}" + (f": {shown}" if shown else ""))
    if lines:
        text += "\nThe project's tests should show this behaviour:\n\n" + "\n".join(lines) + "\n"
    return drop_leaks(text, expected_patch)


def patch_lines(expected_patch: str) -> set[str]:
    try:
        patches = parse(expected_patch, recount=True)
    except PatchError:
        return set()
    return {stripped for p in patches for _, line in p.added_lines() if len(stripped := line.strip()) >= MIN_LEAK}


def drop_leaks(text: str, expected_patch: str) -> str:
    """Every statement line holding an added line of the expected patch is left out."""
    added = patch_lines(expected_patch)
    kept = [line for line in text.splitlines() if not any(a in line for a in added)]
    return "\n".join(kept).strip() + "\n"


def quality(statement: str, expected_patch: str) -> StatementQuality:
    words = len(re.findall(r"\w+", statement))
    shells = [m.group(0) for m in EMPTY_SHELL.finditer(statement)]
    shells += [m.group(0) for m in INLINE_SHELL.finditer(statement)]
    leaks = sorted(a[:120] for a in patch_lines(expected_patch) if a in statement)
    names_behaviour = bool(
        re.search(r"`[^`]+`|\bshould\b|\bexpected?\b|\binstead\b|\braises?\b|\breturns?\b|==|Error\b", statement)
    )
    score = 0.4 * min(words / WORDS_FOR_FULL_LENGTH, 1.0) + 0.3 * names_behaviour + 0.3 * (not shells and not leaks)
    return StatementQuality(
        score=round(score, 2), words=words, names_behaviour=names_behaviour, empty_shells=shells, leaks=leaks
    )
