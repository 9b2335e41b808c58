"""The LLM policies: tool-call parsing, the local transformers policy on the bundled model, and the
OpenAI-compatible policy against a real `transformers serve` of the same model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trajectories.model_server import ModelServer, free_port
from trajectories.policies.base import Message, PolicyError, PolicyOutput, ToolCall
from trajectories.policies.chat import derive_seed, parse_tool_call
from trajectories.policies.hf import HFPolicy
from trajectories.policies.openai import OpenAIPolicy, api_root
from trajectories.tools import TOOLS

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "var" / "models" / "smollm2-135m-instruct"
MAX_NEW = 48  # enough to see a call start; each token is ~0.1 s on a CI core

FIRST_TURN = [
    Message(
        "system",
        "You are a coding agent working in a Python repository. Use the tools to read, edit and "
        "test the code; call submit when the tests pass.",
    ),
    Message(
        "user",
        "Task: `add(2, 3)` in calc.py returns -1 instead of 5. Make tests/test_calc.py pass. Start by reading calc.py.",
    ),
]


# --- parsing: crafted replies -------------------------------------------------------------------


def test_tagged_call_with_thought() -> None:
    reply = parse_tool_call(
        'I will read it first.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n</tool_call>'
    )
    assert reply.error is None
    assert reply.tool_call == ToolCall("read_file", {"path": "calc.py"})
    assert reply.thought == "I will read it first."


def test_arguments_as_json_string() -> None:
    reply = parse_tool_call(
        '<tool_call>{"name": "run_command", "arguments": "{\\"command\\": \\"ls -la\\"}"}</tool_call>'
    )
    assert reply.tool_call == ToolCall("run_command", {"command": "ls -la"})


def test_two_calls_take_the_first() -> None:
    reply = parse_tool_call(
        '<tool_call>{"name": "run_tests", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    assert reply.tool_call is not None and reply.tool_call.name == "run_tests"


def test_lenient_shapes() -> None:
    unclosed = parse_tool_call('<tool_call>\n{"name": "search", "arguments": {"pattern": "def add"}}')
    assert unclosed.tool_call == ToolCall("search", {"pattern": "def add"})
    fenced = parse_tool_call('Let me look.\n```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```')
    assert fenced.tool_call == ToolCall("read_file", {"path": "a.py"})
    assert fenced.thought == "Let me look."
    python_dict = parse_tool_call("<tool_call>{'name': 'submit', 'arguments': {}}</tool_call>")
    assert python_dict.tool_call == ToolCall("submit", {})
    openai_shape = parse_tool_call('<tool_call>{"function": {"name": "submit", "arguments": "{}"}}</tool_call>')
    assert openai_shape.tool_call == ToolCall("submit", {})
    trailing_brace = parse_tool_call('<tool_call>{"name": "submit", "arguments": {}}}</tool_call>')
    assert trailing_brace.tool_call == ToolCall("submit", {})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think the bug is in add().",
        '<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>',
        "<tool_call>read_file calc.py</tool_call>",
        '<tool_call>{"arguments": {"path": "a.py"}}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": ["a.py"]}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": "{not json"}</tool_call>',
        '{"name": "add", "value": 3}',  # JSON in prose that is not a call
        "<tool_call>" + "{" * 5000 + "</tool_call>",
    ],
)
def test_garbage_is_an_error_not_an_exception(text: str) -> None:
    reply = parse_tool_call(text)
    assert reply.tool_call is None
    assert reply.error and "<tool_call>" in reply.error  # the observation tells the model the format


def test_openai_message_reading() -> None:
    structured = OpenAIPolicy.read_message(
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "x.py"}'},
                },
                {"id": "call_10", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
            ],
        }
    )
    assert structured.tool_call == ToolCall("read_file", {"path": "x.py"}, id="call_9")
    assert structured.thought == "Reading." and structured.error is None
    broken = OpenAIPolicy.read_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"path": '}}
            ],
        }
    )
    assert broken.tool_call is None and broken.error and "not valid JSON" in broken.error
    text_only = OpenAIPolicy.read_message(
        {"role": "assistant", "content": 'ok <tool_call>{"name": "submit", "arguments": {}}</tool_call>'}
    )
    assert text_only.tool_call == ToolCall("submit", {}) and text_only.thought == "ok"
    nothing = OpenAIPolicy.read_message({"role": "assistant", "content": "Sure!"})
    assert nothing.tool_call is None and nothing.error


def test_api_root_and_seeds() -> None:
    assert api_root("http://h:8000") == api_root("http://h:8000/v1/") == "http://h:8000/v1"
    chat = [m.to_openai() for m in FIRST_TURN]
    assert derive_seed(5, chat, TOOLS) == derive_seed(5, chat, TOOLS)
    assert derive_seed(5, chat, TOOLS) != derive_seed(6, chat, TOOLS)
    assert derive_seed(5, chat, TOOLS) != derive_seed(5, chat[:1], TOOLS)


# --- the bundled model --------------------------------------------------------------------------


def well_formed(out: PolicyOutput, max_new: int) -> None:
    assert isinstance(out, PolicyOutput)
    assert (out.tool_call is None) != (out.error is None), out  # exactly one of: a call, or why not
    if out.tool_call is not None:
        assert isinstance(out.tool_call.name, str) and isinstance(out.tool_call.arguments, dict)
        json.dumps(out.tool_call.arguments)
    assert out.latency_ms > 0
    assert out.usage["prompt_tokens"] > 100  # the tool schemas are in the prompt
    assert 0 < out.usage["completion_tokens"] <= max_new


def test_chat_template_renders_tools_and_history(model_dir: str) -> None:
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir))
    history = [
        *FIRST_TURN,
        Message("assistant", "Reading it.", [ToolCall("read_file", {"path": "calc.py"}, "c1")]),
        Message("tool", "def add(a, b):\n    return a - b\n", tool_call_id="c1", name="read_file"),
    ]
    chat = [m.to_openai() for m in history]
    prompt = tokenizer.apply_chat_template(chat, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert '"name": "edit_file"' in prompt  # schemas shown
    assert 'Reading it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n</tool_call>' in prompt
    assert "<tool_response>\ndef add(a, b):" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    # Generation markers: trainers can learn from the assistant's turns only.
    enc = tokenizer.apply_chat_template(chat, tools=TOOLS, return_dict=True, return_assistant_tokens_mask=True)
    learned = tokenizer.decode([t for t, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m])
    assert learned.startswith("Reading it.\n<tool_call>") and "tool_response" not in learned


@pytest.fixture(scope="module")
def hf_policy(model_dir: str) -> Iterator[HFPolicy]:
    policy = HFPolicy(str(model_dir), temperature=0.8, seed=1234, max_new_tokens=MAX_NEW)
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def first_output(hf_policy: HFPolicy) -> PolicyOutput:
    return hf_policy.act(FIRST_TURN, TOOLS)


def test_hf_policy_first_turn(hf_policy: HFPolicy, first_output: PolicyOutput) -> None:
    well_formed(first_output, MAX_NEW)
    assert first_output.raw  # the model said something
    info = hf_policy.describe()
    assert info["kind"] == "hf" and info["seed"] == 1234 and info["temperature"] == 0.8
    marker = json.loads((MODEL_DIR / ".crucible-fetch.json").read_text())
    assert info["checkpoint"] == marker["sha256"]


def test_hf_policy_same_seed_same_output(hf_policy: HFPolicy, first_output: PolicyOutput) -> None:
    again = hf_policy.act(FIRST_TURN, TOOLS)
    assert again.raw == first_output.raw
    assert again.tool_call == first_output.tool_call


def test_hf_policy_failures_are_policy_errors(hf_policy: HFPolicy, tmp_path: Path) -> None:
    huge = [FIRST_TURN[0], Message("user", "word " * 9000)]
    with pytest.raises(PolicyError, match="context"):
        hf_policy.act(huge, TOOLS)  # refused before generating anything
    with pytest.raises(PolicyError, match="no model directory"):
        HFPolicy(str(tmp_path / "no-such-model"))


# --- an OpenAI-compatible server ----------------------------------------------------------------


def test_openai_policy_against_transformers_serve(model_server: ModelServer) -> None:
    served = model_server
    policy = OpenAIPolicy(served.base_url, served.model, temperature=0.8, seed=7, max_tokens=MAX_NEW, timeout=120)
    try:
        out = policy.act(FIRST_TURN, TOOLS)
        well_formed(out, MAX_NEW)
        assert policy.describe()["kind"] == "openai"
        # A request the server refuses (it is pinned to one model) is the policy failing, not the model.
        wrong = OpenAIPolicy(served.base_url + "/v1", "no-such-model", max_tokens=4)
        with pytest.raises(PolicyError, match="HTTP 4"):
            wrong.act(FIRST_TURN, TOOLS)
        wrong.close()
    finally:
        policy.close()


def test_openai_policy_dead_port_is_a_policy_error() -> None:
    policy = OpenAIPolicy(f"http://127.0.0.1:{free_port()}", "m", timeout=5)
    with pytest.raises(PolicyError, match="cannot reach model server http://127.0.0.1"):
        policy.act(FIRST_TURN, TOOLS)
    policy.close()
