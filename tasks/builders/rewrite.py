"""A problem statement rewritten by a model behind an OpenAI-compatible server. Plain Python.

A composed statement (`statements.compose`) is faithful but reads like a changelog; a model can
turn it into the issue a user would file. The model never sees the expected patch, and its answer
is hostile input: bounded, stripped of code fences and chat tokens, and refused, with the reason
kept, when it carries HTML, a line of the patch, an empty reference shell, a hidden test's name,
a file the snapshot lacks, or scores lower than the statement it was asked to improve. Whether
accepted or not, the prompt and the original are kept in a `StatementGeneration` record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple, TypedDict

import httpx

from core import model_servers
from core.model_servers import Origin, ServerNotAllowed, shown
from patches import PatchError, parse
from tasks.builders import statements

DEFAULT_MAX_TOKENS = 400
DEFAULT_TEMPERATURE = 0.3
DEFAULT_SEED = 0
DEFAULT_TIMEOUT_S = 120.0
# A reply body past this is not read at all; an answer past MAX_ANSWER_CHARS is refused, not cut,
# since a cut issue ends mid-sentence and says less than the statement it replaces.
MAX_RESPONSE_BYTES = 256 * 1024
MAX_ANSWER_CHARS = 4000
MAX_PROMPT_STATEMENT_CHARS = 6000
MAX_PROMPT_TESTS = 6
MAX_PROMPT_ASSERTIONS = 8
MAX_REASON = 300
# Hidden test names shorter than this are ordinary words ("test_a" -> "a"); validation uses the same bound.
MIN_TEST_NAME = 6

INSTRUCTIONS = (
    "Rewrite the problem statement below as the GitHub issue a user of this project would write: "
    "what they did, what happened, and what they expected instead. Write plain Markdown, at most "
    "200 words. Do not propose a fix and do not show code of a fix. Do not name test functions. "
    "Do not invent file names, links, commit hashes or issue numbers."
)

# Chat-template tokens a small model echoes (`<|im_end|>`, `<|endoftext|>`).
CHAT_TOKEN = re.compile(r"<\|[^<>|]{0,40}\|>")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*([\w+-]*)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
# An HTML tag or comment outside inline code: a statement is Markdown shown on pages and in an
# agent's prompt, and a model asked for prose that answers with markup is not to be trusted.
HTML = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|<!--|<!\[CDATA\[|<![A-Za-z]", re.IGNORECASE)
# What Python prints in angle brackets in a traceback (`File "<stdin>"`, `in <module>`) is not markup.
PYTHON_PLACEHOLDER = re.compile(r"<(?:module|stdin|string|lambda|listcomp|dictcomp|setcomp|genexpr|locals)>")
PREAMBLE = re.compile(r"^(?:sure|certainly|okay|ok|of course|here(?:'s| is| are))\b[^\n]{0,120}:\s*\n", re.IGNORECASE)
PATH_TOKEN = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w+|[\w-]+\.py)\b")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
# The prompt's own scaffolding coming back: a small model continues the prompt rather than answering it.
ECHO = re.compile(
    r"^\s*problem statement\s*:|^\s*issue\s*:\s*$|tests check once it works|rewrite the problem statement", re.I | re.M
)
# A model stuck in a loop: the same long line twice, or few distinct word triples among many.
REPEATED_LINE = 20
MIN_DISTINCT_TRIPLES = 0.6


class RewriteError(Exception):
    """The rewrite could not be asked for (server not allowed, unreachable, not a chat completion)."""


class StatementQualities(TypedDict):
    original: float
    generated: float


class StatementGeneration(TypedDict):
    """What `task.metadata["statement_generation"]` keeps of one rewrite, accepted or not."""

    model: str
    server: str
    prompt: str  # exactly the text sent, as the one user message
    original: str  # the statement the model was asked to rewrite
    generated: str  # the answer once cleaned ("" when it could not be read at all)
    generated_at: str  # ISO 8601, UTC
    accepted: bool
    reason: str  # why it was refused; "" when accepted
    quality: StatementQualities
    params: dict[str, Any]  # max_tokens, temperature, seed


@dataclass(frozen=True)
class RewriteContext:
    statement: str  # the composed statement
    expected_patch: str  # only ever used to refuse answers that leak it
    failing_tests: Sequence[str] = ()  # node ids of the tests the fix makes pass
    assertions: Sequence[str] = ()  # what those tests assert, one line each
    hidden_tests: Sequence[str] = ()  # every test id the agent must not be told (FAIL_TO_PASS + PASS_TO_PASS)
    known_paths: Collection[str] | None = None  # the snapshot's files; None: not checked
    base_commit: str = ""


# --- the server -------------------------------------------------------------------------------


def check_server(base_url: str) -> Origin:
    """The server's origin when the operator lists it (core.model_servers); RewriteError otherwise."""
    if not base_url.strip():
        raise RewriteError("a statement rewrite needs the model server's base URL")
    try:
        return model_servers.check_server(base_url)
    except ServerNotAllowed as exc:
        raise RewriteError(str(exc)) from None


def server_key(origin: Origin) -> str | None:
    """A key goes only to the origin CRUCIBLE_MODEL_SERVER_KEYS sets it for, as for the `openai` policy."""
    try:
        return model_servers.server_key(origin)
    except ServerNotAllowed as exc:
        raise RewriteError(str(exc)) from None


def api_root(base_url: str) -> str:
    root = base_url.strip().rstrip("/")
    return root if root.endswith("/v1") else f"{root}/v1"


class Answer(NamedTuple):
    text: str
    cut: bool  # the server stopped at max_tokens: the issue ends mid-sentence


class AnswerTooLarge(RewriteError):
    """The reply was there but past the limit: a verdict on the answer, recorded like any refusal."""


class ChatClient:
    """One chat completion per prompt; the reply is read up to MAX_RESPONSE_BYTES and no further."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = DEFAULT_TEMPERATURE,
        seed: int = DEFAULT_SEED,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not model.strip():
            raise RewriteError("a statement rewrite needs the model's name")
        origin = check_server(base_url)
        self.server = api_root(base_url)
        self.model = model
        self.params: dict[str, Any] = {"max_tokens": int(max_tokens), "temperature": float(temperature), "seed": seed}
        key = server_key(origin)
        # A redirect would carry the request (and its key) wherever the server points it.
        self.client = httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=timeout,
            follow_redirects=False,
        )

    def complete(self, prompt: str) -> Answer:
        """The answer; raises RewriteError when there is no answer to judge, or the answer is too large."""
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}], **self.params}
        try:
            with self.client.stream("POST", "/chat/completions", json=body) as response:
                # Nothing of the reply's body reaches a message: the server could say anything there.
                if response.is_redirect:
                    raise RewriteError(f"model server {self.server} answered with a redirect, not followed")
                if response.status_code >= 300:
                    raise RewriteError(f"model server {self.server} answered HTTP {response.status_code}")
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > MAX_RESPONSE_BYTES:
                        raise AnswerTooLarge(f"the server's reply is larger than {MAX_RESPONSE_BYTES} bytes")
        except httpx.TimeoutException:
            raise RewriteError(f"model server {self.server} did not answer within the timeout") from None
        except httpx.HTTPError as exc:
            raise RewriteError(f"cannot reach model server {self.server}: {type(exc).__name__}") from None
        try:
            choice = json.loads(bytes(data))["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise RewriteError(f"model server {self.server} sent a reply that is not a chat completion") from None
        if isinstance(content, list):  # content parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise RewriteError(f"model server {self.server} sent a reply without text")
        return Answer(content, choice.get("finish_reason") == "length")

    def close(self) -> None:
        self.client.close()


# --- the prompt -------------------------------------------------------------------------------


def function_of(node_id: str) -> str:
    """`tests/test_x.py::TestY::test_z[1-2]` -> `test_z`."""
    return node_id.split("::")[-1].split("[")[0]


def assertions_in(source: str, function: str, limit: int = 3) -> list[str]:
    """The assertion lines in the body of `def function(...)` of a test file."""
    found: list[str] = []
    inside, indent = False, 0
    for line in source.splitlines():
        defined = statements.TEST_DEF.match(line)
        if defined:
            inside, indent = defined.group(1) == function, len(line) - len(line.lstrip())
            continue
        if inside and line.strip() and len(line) - len(line.lstrip()) <= indent:
            inside = False
        if inside and statements.ASSERTION.match(line):
            found.append(line.strip()[: statements.MAX_LINE])
            if len(found) >= limit:
                break
    return found


def leaked_lines(text: str, expected_patch: str) -> list[str]:
    """Lines the patch adds or removes (long enough to mean something) found in text, spaces folded."""
    folded = _fold(text)
    return sorted(line for line in _changed_lines(expected_patch) if line in folded)


@lru_cache(maxsize=16)
def _changed_lines(expected_patch: str) -> frozenset[str]:
    try:
        patches = parse(expected_patch, recount=True)
    except PatchError:
        return frozenset()
    return frozenset(
        _fold(line)
        for p in patches
        for line in (*(x for _, x in p.added_lines()), *(x for _, x in p.removed_lines()))
        if len(line.strip()) >= statements.MIN_LEAK
    )


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def build_prompt(context: RewriteContext) -> str:
    """The one user message: instructions, the statement, what the tests check. Never the patch.

    The statement and test lines were composed without the patch, but a line is dropped here if it
    holds one anyway: the guarantee is this function's, not its callers'.
    """
    statement = context.statement.strip()[:MAX_PROMPT_STATEMENT_CHARS]
    parts = [INSTRUCTIONS, "", "Problem statement:", "", statement]
    behaviour = [f"- {statements.humanise(function_of(t))}" for t in context.failing_tests[:MAX_PROMPT_TESTS]]
    behaviour += [f"- `{a}`" for a in context.assertions[:MAX_PROMPT_ASSERTIONS]]
    if behaviour:
        parts += ["", "What the project's tests check once it works:", "", *behaviour]
    parts += ["", "Issue:"]
    return "\n".join(line for line in "\n".join(parts).splitlines() if not leaked_lines(line, context.expected_patch))


# --- judging the answer -----------------------------------------------------------------------


class Refused(Exception):
    pass


def clean_answer(answer: str) -> str:
    """The answer as a statement: chat tokens, control characters, code fences and a preamble gone.

    Raises Refused when it is too long to be an issue, holds HTML, or is empty once cleaned.
    """
    if len(answer) > MAX_ANSWER_CHARS:
        raise Refused(f"the answer is {len(answer)} characters long, over the limit of {MAX_ANSWER_CHARS}")
    text = CONTROL.sub("", CHAT_TOKEN.sub("", answer.replace("\r\n", "\n").replace("\r", "\n")))
    markup = HTML.search(PYTHON_PLACEHOLDER.sub("", INLINE_CODE.sub("", text)))
    if markup:
        raise Refused(f"the answer holds HTML markup: {shown(markup.group(0), 60)}")
    text = unfence(PREAMBLE.sub("", text.lstrip()))
    text = "\n".join(line.rstrip() for line in text.splitlines())
    # Leading blank lines go, not the first line's indent: that may be a code block's.
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    if not text.strip():
        raise Refused("the answer is empty once markup is stripped")
    return text + "\n"


def unfence(text: str) -> str:
    """Code fences gone: an answer wrapped whole in one (```markdown) is unwrapped, and a code block
    inside it is kept as an indented block, so a traceback still reads as one."""
    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if FENCE.match(line)]
    written = [i for i, line in enumerate(lines) if line.strip()]
    if len(fences) >= 2 and len(fences) % 2 == 0 and (fences[0], fences[-1]) == (written[0], written[-1]):
        opening = FENCE.match(lines[fences[0]])
        info = opening.group(1).lower() if opening else ""
        # A bare ``` opening one of several blocks is a code block, not a wrapper.
        if info in ("markdown", "md", "text") or (info == "" and len(fences) == 2):
            lines = lines[fences[0] + 1 : fences[-1]]
    out: list[str] = []
    inside = False
    for line in lines:
        if FENCE.match(line):
            inside = not inside
            out.append("")  # an indented block cannot interrupt a paragraph: blank lines around it
            continue
        out.append(f"    {line}" if inside and line.strip() else line)
    return "\n".join(out)


def refusal(text: str, context: RewriteContext, original_score: float, generated_score: float) -> str:
    """Why this cleaned answer may not replace the statement, or "" when it may."""
    leaks = leaked_lines(text, context.expected_patch)
    if leaks:
        # Not quoted: the reason is shown and exported, and must not carry the answer key itself.
        return f"the answer holds {len(leaks)} line(s) of the expected patch"
    shells = [m.group(0) for m in statements.EMPTY_SHELL.finditer(text)]
    if shells:
        return f"the answer holds an empty reference shell: {shown(shells[0], 40)}"
    reference = statements.REFERENCE.search(text)
    if reference:
        return f"the answer names an issue or pull request nobody linked: {shown(reference.group(0), 60)}"
    if ECHO.search(text):
        return "the answer repeats the prompt instead of rewriting the statement"
    if repetitive(text):
        return "the answer repeats itself"
    for node in context.hidden_tests:
        name = function_of(node)
        if len(name) >= MIN_TEST_NAME and re.search(rf"\b{re.escape(name)}\b", text):
            return f"the answer names a hidden test: {shown(name, 80)}"
    base = context.base_commit.lower()
    if len(base) >= 7 and any(base.startswith(h) or h.startswith(base) for h in HEX.findall(text.lower())):
        return "the answer names the base commit"
    if context.known_paths is not None:
        missing = sorted(
            {p for p in PATH_TOKEN.findall(text) if not _known(p, context.known_paths) and p not in context.statement}
        )
        if missing:
            return f"the answer names files the snapshot lacks: {', '.join(shown(p, 60) for p in missing[:3])}"
    if generated_score < original_score:
        return f"its statement quality {generated_score} is lower than the composed statement's {original_score}"
    return ""


def repetitive(text: str) -> bool:
    lines = [_fold(line).lower() for line in text.splitlines() if len(line.strip()) >= REPEATED_LINE]
    if len(lines) != len(set(lines)):
        return True
    words = re.findall(r"\w+", text.lower())
    triples = list(zip(words, words[1:], words[2:], strict=False))
    return len(triples) >= 30 and len(set(triples)) / len(triples) < MIN_DISTINCT_TRIPLES


def _known(path: str, known: Collection[str]) -> bool:
    path = re.sub(r"^(\.+/)+", "", path)
    return any(f == path or f.endswith("/" + path) for f in known)


def rewrite(context: RewriteContext, client: ChatClient, now: datetime | None = None) -> StatementGeneration:
    """Ask the server once and judge the answer. RewriteError when there is no answer at all."""
    prompt = build_prompt(context)
    generated, reason = "", ""
    original_score = statements.quality(context.statement, context.expected_patch)["score"]
    generated_score = 0.0
    try:
        answer = client.complete(prompt)
        generated = clean_answer(answer.text)
        generated_score = statements.quality(generated, context.expected_patch)["score"]
        reason = refusal(generated, context, original_score, generated_score)
        if not reason and answer.cut:
            reason = f"the answer was cut off at the {client.params['max_tokens']}-token limit"
    except (Refused, AnswerTooLarge) as exc:
        reason = str(exc)
    if reason and leaked_lines(generated, context.expected_patch):
        # A refused answer is kept for a person to judge, but not one holding the answer key.
        generated = ""
    return StatementGeneration(
        model=client.model[:200],
        server=client.server[:200],
        prompt=prompt,
        original=context.statement,
        generated=generated,
        generated_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        accepted=not reason,
        reason=reason[:MAX_REASON],
        quality=StatementQualities(original=original_score, generated=generated_score),
        params=dict(client.params),
    )
