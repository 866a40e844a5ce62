"""The official OpenAI Python SDK streaming from `turnscope model serve`."""

import json

from openai import OpenAI


def test_streams_plain_words(model_server):
    client = OpenAI(base_url=model_server, api_key="unused")
    stream = client.chat.completions.create(
        model="turnscope-scripted",
        messages=[{"role": "user", "content": "good morning"}],
        stream=True,
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "You said: good morning and that"
    assert len(pieces) == 6


def test_streams_a_tool_call_when_the_line_names_the_tool(model_server):
    client = OpenAI(base_url=model_server, api_key="unused")
    tools = [{
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }]
    stream = client.chat.completions.create(
        model="turnscope-scripted",
        messages=[{"role": "user", "content": "weather in Paris"}],
        tools=tools,
        stream=True,
    )
    calls = {}
    finish = None
    for chunk in stream:
        choice = chunk.choices[0]
        for d in choice.delta.tool_calls or []:
            entry = calls.setdefault(d.index, {"name": "", "args": ""})
            if d.function and d.function.name:
                entry["name"] += d.function.name
            if d.function and d.function.arguments:
                entry["args"] += d.function.arguments
        finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert calls[0]["name"] == "weather"
    assert json.loads(calls[0]["args"]) == {"city": "Paris"}, "the small word before the city is left out"


def test_models_and_non_streaming(model_server):
    client = OpenAI(base_url=model_server, api_key="unused")
    assert [m.id for m in client.models.list()] == ["turnscope-scripted"]
    reply = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "You said: hi and that is"


def test_usage_chunk_and_a_length_cut_as_openai_sends_them(model_server):
    """`stream_options.include_usage` gives a final chunk with no choices and the usage (the
    scripted model counts one token per word); `max_tokens` cuts the answer with `length`."""
    client = OpenAI(base_url=model_server, api_key="unused")
    stream = client.chat.completions.create(
        model="turnscope-scripted",
        messages=[{"role": "user", "content": "good morning to you"}],
        stream=True,
        max_tokens=3,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "You said: good"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    last = chunks[-1]
    assert last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (4, 3, 7)
    whole = client.chat.completions.create(
        model="turnscope-scripted",
        messages=[{"role": "user", "content": "good morning to you"}],
        max_tokens=3,
    )
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 3
