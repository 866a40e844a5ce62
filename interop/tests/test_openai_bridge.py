"""The official OpenAI Python SDK against turnscope's OpenAI bridge, with the Node reference
server @modelcontextprotocol/server-everything as the MCP upstream (over stdio).

- A full agent loop through the embedded `/v1/chat/completions` of `turnscope --headless`
  (bot tools from server-everything, the embedded scripted model, which calls a tool when the
  user's line names it): whole, streamed, and with a client-side tool the SDK runs itself.
- mcp-openai-bridge's README flow against `turnscope bridge openai --stdio "node ..."`:
  GET /v1/tools, hand the tools to a model, POST /v1/execute with the JSON *string* arguments
  the SDK gives, feed the result back as a tool message.
"""

import json
import pathlib
import shlex
import subprocess

import httpx
import openai
import pytest
from openai import OpenAI

from conftest import Running, binary

EVERYTHING = (
    pathlib.Path(__file__).resolve().parents[1]
    / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def everything() -> str:
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing; run interop/run (it runs npm install in interop/)")
    return str(EVERYTHING)


def first_url(proc) -> str:
    line = proc.stdout.readline()
    words = [w for w in line.split() if w.startswith("http://")]
    if not words:
        proc.kill()
        pytest.fail(f"no URL in the ready line: {line!r}")
    return words[0]


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def bot():
    """turnscope --headless whose only tools are server-everything's; yields the /v1 base URL."""
    config = (
        "[model]\npace = 0.0\n"
        "[bot]\nbuiltin_tools = false\n"
        "[[mcp_servers]]\n"
        'name = "everything"\n'
        'command = "node"\n'
        f"args = [{json.dumps(everything())}, \"stdio\"]\n"
    )
    running = Running(["--headless", "--port", "0"], config)
    yield running.url[: -len("/mcp")] + "/v1"
    running.stop()


@pytest.fixture
def bridge():
    """turnscope bridge openai --stdio "node .../server-everything stdio"; yields its base URL."""
    line = f"node {shlex.quote(everything())} stdio"
    proc = subprocess.Popen(
        [binary(), "bridge", "openai", "--stdio", line, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = first_url(proc)
    yield url[: -len("/v1/tools")]
    stop(proc)


@pytest.fixture
def model():
    """turnscope model serve with whole sentences (no word limit); yields its /v1 base URL."""
    proc = subprocess.Popen(
        [binary(), "model", "serve", "--port", "0", "--pace", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    yield first_url(proc)
    stop(proc)


def test_agent_loop_runs_a_server_everything_tool(bot):
    client = OpenAI(base_url=bot, api_key="unused")
    assert [m.id for m in client.models.list()] == ["turnscope-scripted"]
    reply = client.chat.completions.create(
        model="anything",
        messages=[{"role": "user", "content": "get-sum of 2 and 3 please"}],
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.content == "The get-sum tool says: The sum of 2 and 3 is 5."


def test_agent_loop_streams(bot):
    client = OpenAI(base_url=bot, api_key="unused")
    stream = client.chat.completions.create(
        model="anything",
        messages=[{"role": "user", "content": "echo hello from python"}],
        stream=True,
    )
    pieces, finish = [], None
    for chunk in stream:
        choice = chunk.choices[0]
        if choice.delta.content:
            pieces.append(choice.delta.content)
        finish = choice.finish_reason or finish
    assert finish == "stop"
    assert "".join(pieces) == "The echo tool says: Echo: hello from python."
    assert len(pieces) > 1, "streamed piece by piece"


def test_agent_loop_with_a_client_tool(bot):
    client = OpenAI(base_url=bot, api_key="unused")
    tools = [{
        "type": "function",
        "function": {
            "name": "lookup_city",
            "description": "Where a city is (run by the client).",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }]
    messages = [{"role": "user", "content": "lookup_city Paris"}]
    first = client.chat.completions.create(model="anything", messages=messages, tools=tools)
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup_city"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    messages.append(first.choices[0].message)
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "Paris is in France"})
    final = client.chat.completions.create(model="anything", messages=messages, tools=tools)
    assert final.choices[0].message.content == "The lookup_city tool says: Paris is in France."


def test_a_response_calling_a_bot_tool_and_a_client_tool_loses_neither(bot):
    """One response calls the bot's `get-sum` (server-everything's) and the client's `my_tool`:
    the client is handed `my_tool` only, and when it sends that call back with its result, the
    bot's call goes back beside it, run, so the model answers from both results (the bot's call
    was dropped: never run, its result never seen)."""
    client = OpenAI(base_url=bot, api_key="unused")
    tools = [{"type": "function", "function": {"name": "my_tool", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "get-sum of 2 and 3 and my_tool please"}]
    first = client.chat.completions.create(model="anything", messages=messages, tools=tools)
    assert first.choices[0].finish_reason == "tool_calls"
    calls = first.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["my_tool"], calls
    messages.append(first.choices[0].message)
    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": "MYRESULT"})
    final = client.chat.completions.create(model="anything", messages=messages, tools=tools)
    text = final.choices[0].message.content
    assert "The get-sum tool says: The sum of 2 and 3 is 5." in text, text
    assert "The my_tool tool says: MYRESULT." in text, text


def test_chat_completions_report_usage_as_openai_does(bot):
    """`usage` on a whole answer (summed over the loop's model requests: here the call and the
    answer after it; the scripted model counts one token per word), and the usage chunk last,
    with no choices, when a stream asks with `stream_options.include_usage`; none otherwise."""
    client = OpenAI(base_url=bot, api_key="unused")
    messages = [{"role": "user", "content": "echo hello from python"}]
    whole = client.chat.completions.create(model="anything", messages=messages)
    usage = whole.usage
    assert usage is not None, whole
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    chunks = list(
        client.chat.completions.create(
            model="anything", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    last = chunks[-1]
    assert last.choices == [], last
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (usage.prompt_tokens, usage.completion_tokens)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]

    plain = list(client.chat.completions.create(model="anything", messages=messages, stream=True))
    assert all(c.usage is None for c in plain), "no usage chunk unless asked"


def test_the_readme_flow(bridge, model):
    tools = httpx.get(f"{bridge}/v1/tools").json()
    names = [t["function"]["name"] for t in tools]
    for name in ["echo", "get-sum", "get-tiny-image", "get-structured-content"]:
        assert name in names
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)

    client = OpenAI(base_url=model, api_key="unused")
    messages = [{"role": "user", "content": "get-sum of 20 and 22"}]
    response = client.chat.completions.create(model="turnscope-scripted", messages=messages, tools=tools)
    tool_call = response.choices[0].message.tool_calls[0]
    assert isinstance(tool_call.function.arguments, str)

    result = httpx.post(
        f"{bridge}/v1/execute",
        json={"name": tool_call.function.name, "arguments": tool_call.function.arguments},
    ).json()
    assert result["is_error"] is False
    assert result["content"] == [{"type": "text", "text": "The sum of 20 and 22 is 42."}]

    messages.append(response.choices[0].message)
    messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": result["content"]})
    final = client.chat.completions.create(model="turnscope-scripted", messages=messages, tools=tools)
    assert final.choices[0].message.content == "The get-sum tool says: The sum of 20 and 22 is 42."


def test_typed_content_and_tool_errors(bridge):
    image = httpx.post(f"{bridge}/v1/execute", json={"name": "get-tiny-image"}).json()
    assert image["is_error"] is False
    kinds = [part["type"] for part in image["content"]]
    assert "image" in kinds
    png = next(p for p in image["content"] if p["type"] == "image")
    assert png["mimeType"] == "image/png" and len(png["data"]) > 20

    weather = httpx.post(
        f"{bridge}/v1/execute",
        json={"name": "get-structured-content", "arguments": {"location": "Chicago"}},
    ).json()
    assert weather["is_error"] is False
    assert "temperature" in weather["structured_content"]

    unknown = httpx.post(f"{bridge}/v1/execute", json={"name": "nope", "arguments": "{}"})
    assert unknown.status_code == 200
    assert unknown.json()["is_error"] is True and "`nope`" in unknown.json()["text"]

    bad = httpx.post(f"{bridge}/v1/execute", json={"arguments": {}})
    assert bad.status_code == 400
    assert "name" in bad.json()["error"]["message"]


def test_a_tool_the_server_runs_only_as_a_task_is_said_so_and_no_longer_offered(bridge):
    # server-everything's simulate-research-query has `execution.taskSupport: required`, which
    # the client only learns from the refusal of a plain call.
    def offered():
        return [t["function"]["name"] for t in httpx.get(f"{bridge}/v1/tools").json()]

    assert "simulate-research-query" in offered()
    refused = httpx.post(
        f"{bridge}/v1/execute",
        json={"name": "simulate-research-query", "arguments": {"topic": "cats"}},
    ).json()
    assert refused["is_error"] is True
    assert "only as an MCP task" in refused["text"], refused["text"]
    assert "no longer offered" in refused["text"], refused["text"]
    assert "simulate-research-query" not in offered()
    assert "get-sum" in offered()


def test_the_sdk_reads_the_servers_refusals_as_its_own_errors():
    """A wrong API key (turnscope's bearer token), a body over the limit and a bridge with no
    model: the SDK raises its own error classes with turnscope's words as the message, since
    every answer under /v1/ is OpenAI's error envelope (the guard's were plain text)."""
    running = Running(
        ["--headless", "--port", "0", "--auth-token", "right-token"], "[model]\npace = 0.0\n"
    )
    try:
        base = running.url[: -len("/mcp")] + "/v1"
        wrong = OpenAI(base_url=base, api_key="wrong-token", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as refused:
            wrong.models.list()
        assert "--auth-token" in refused.value.message, refused.value.message
        assert refused.value.body["type"] == "authentication_error"

        right = OpenAI(base_url=base, api_key="right-token", max_retries=0)
        huge = "word " * (1024 * 1024)
        with pytest.raises(openai.APIStatusError) as too_large:
            right.chat.completions.create(
                model="any", messages=[{"role": "user", "content": huge}]
            )
        assert too_large.value.status_code == 413
        assert "server.max_body_bytes" in too_large.value.message, too_large.value.message
        assert too_large.value.code == "request_too_large"
    finally:
        running.stop()


def test_a_bridge_without_a_model_says_where_chat_is_served(bridge):
    client = OpenAI(base_url=f"{bridge}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}])
    assert "serves GET /v1/tools and POST /v1/execute only" in missing.value.message
