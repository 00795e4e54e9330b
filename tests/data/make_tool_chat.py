#!/usr/bin/env python3
"""Makes tests/data/tool_chat/cases.json: conversations with tools rendered by a
real Jinja2 engine with the official SmolLM3 chat template, the way
transformers' apply_chat_template renders them.

The template is read from the GGUF key tokenizer.chat_template of a fixture
file (default ../shared/fixtures/tiny-q4km.gguf), so the goldens follow the
template the library actually meets. Self-contained: needs only jinja2
(Debian's python3-jinja2); the GGUF metadata is parsed here.

How transformers renders (mirrored below, as for the fixtures' chat goldens):
  - jinja2 ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    with jinja2.ext.loopcontrols and an extension for {% generation %} ...
    {% endgeneration %} (transformers' AssistantTracker; here a no-op that
    renders its body);
  - globals strftime_now (here: returns the fixed date) and raise_exception;
  - render(messages=..., tools=..., add_generation_prompt=..., **kwargs) where
    kwargs holds enable_thinking only when the case sets it;
  - tools as the dicts transformers builds:
    {"type": "function", "function": {"name", "description", "parameters"}},
    so the template's `tool | string` is Python's str() of that dict.

Each case stores the inputs as smol's API takes them (ToolDefinition fields,
parameters as JSON text: the text is what the C++ side parses, json.loads of
it is what Python renders) and the exact expected text.

Usage: python3 tests/data/make_tool_chat.py [path/to/file.gguf]
"""

import json
import os
import re
import struct
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_GGUF = os.path.join(HERE, "..", "..", "..", "shared", "fixtures", "tiny-q4km.gguf")
OUT = os.path.join(HERE, "tool_chat", "cases.json")
TODAY = "21 November 2026"  # the date the fixtures' chat goldens use


def read_chat_template(path):
    """The string value of tokenizer.chat_template in a GGUF v2/v3 file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        raise SystemExit(f"{path}: not a GGUF file")
    pos = 4
    (version,) = struct.unpack_from("<I", data, pos)
    pos += 4
    if version not in (2, 3):
        raise SystemExit(f"{path}: GGUF version {version} not supported")
    _n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}

    def read_string(pos):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        return data[pos:pos + n], pos + n

    def skip_value(kind, pos):
        if kind in scalar:
            return pos + struct.calcsize(scalar[kind])
        if kind == 8:
            return read_string(pos)[1]
        if kind == 9:
            item_kind, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if item_kind in scalar:
                return pos + count * struct.calcsize(scalar[item_kind])
            for _ in range(count):
                pos = skip_value(item_kind, pos)
            return pos
        raise SystemExit(f"{path}: unknown GGUF value type {kind}")

    for _ in range(n_kv):
        key, pos = read_string(pos)
        (kind,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if key == b"tokenizer.chat_template":
            if kind != 8:
                raise SystemExit(f"{path}: tokenizer.chat_template is not a string")
            return read_string(pos)[0].decode("utf-8")
        pos = skip_value(kind, pos)
    raise SystemExit(f"{path}: no tokenizer.chat_template")


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers marks assistant
    tokens with it; for rendering it is its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: TODAY
    return env


def tool(name, description, parameters_text):
    return {"name": name, "description": description, "parameters": parameters_text}


def tool_call_text(name, arguments):
    # What SmolLM3 is told to emit (and what transformers' examples feed back).
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


WEATHER = tool(
    "get_weather",
    "Get the current weather in a given city.",
    json.dumps({
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city, e.g. \"Paris, France\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        },
        "required": ["location"],
    }))

# Numbers of every shape (int, float, exponent, trailing zeros), booleans,
# null, nested objects and arrays, in a source text with its own spacing.
SEARCH = tool(
    "search_products",
    "Search the catalogue. Don't guess prices: call this first.",
    """{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1},
    "max_results": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100},
    "min_rating": {"type": "number", "default": 1.5, "multipleOf": 0.25},
    "tolerance": {"type": "number", "default": 1e-3, "maximum": 2.50, "minimum": -3},
    "big": {"type": "number", "default": 1E21, "examples": [100.0, 12345678901234567890, -0.0]},
    "in_stock": {"type": "boolean", "default": true},
    "discounted": {"type": "boolean", "default": false},
    "category": {"type": ["string", "null"], "default": null},
    "filters": {
      "type": "object",
      "properties": {
        "price": {"type": "object", "properties": {"min": {"type": "number"}, "max": {"type": "number"}}},
        "tags": {"type": "array", "items": {"type": "string"}, "default": []}
      },
      "additionalProperties": false
    }
  },
  "required": ["query"]
}""")

# Descriptions whose repr needs care: both quote kinds, backslashes, control
# characters, non-ASCII printable text, and characters Python's repr escapes.
NOTE = tool(
    "save_note",
    "Saves a note.\nThe title may contain \"quotes\" and 'apostrophes'.\tTabs too, and a back\\slash.\n"
    "Unicode: café ☕ 日本語 — ok; escaped by repr: nbsp[\u00a0] zwsp[\u200b] del[\x7f] bell[\x07].",
    json.dumps({
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "It's the title"},
            "body": {"type": "string", "description": "Say \"hi\" or 'bye'"},
            "priority": {"type": "integer", "enum": [1, 2, 3]},
        },
        "required": ["title", "body"],
    }, ensure_ascii=False))

CALC = tool(
    "calculate",
    'Evaluates an expression like "2 * (3 + 4)"',
    '{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}')

# The ToolDefinition default parameters (no arguments), empty description.
PING = tool("ping", "", '{"type": "object", "properties": {}}')


def cases():
    weather_call = tool_call_text("get_weather", {"location": "Paris, France", "unit": "celsius"})
    search_call = tool_call_text("search_products", {
        "query": "green tea", "max_results": 5, "min_rating": 4.5, "in_stock": True,
        "category": None, "filters": {"price": {"max": 20}, "tags": ["organic", "loose leaf"]}})
    yield {
        "name": "one_tool_think_default",
        "tools": [WEATHER],
        "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
        "options": {"add_generation_prompt": True},
    }
    yield {
        "name": "one_tool_call_and_result_no_think",
        "tools": [WEATHER],
        "messages": [
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": weather_call},
            {"role": "tool", "content": "{\"temperature\": 18.5, \"condition\": \"cloudy\"}"},
        ],
        "options": {"add_generation_prompt": True, "enable_thinking": False},
    }
    yield {
        "name": "three_tools_system_think",
        "tools": [SEARCH, NOTE, CALC],
        "messages": [
            {"role": "system", "content": "You are a shopping assistant.\n"},
            {"role": "user", "content": "Find me some green tea under 20 euros, and note it."},
            {"role": "assistant",
             "content": "<think>\nI should search first.\n</think>\n" + search_call},
            {"role": "tool", "content": "[{\"name\": \"Sencha\", \"price\": 12.9}]"},
        ],
        "options": {"add_generation_prompt": True, "enable_thinking": True},
    }
    yield {
        "name": "two_tools_system_no_think_flag",
        "tools": [NOTE, PING],
        "messages": [
            {"role": "system", "content": "Be brief. /no_think"},
            {"role": "user", "content": "Save a note titled \"Groceries\": milk, eggs."},
            {"role": "assistant", "content": "\n" + tool_call_text(
                "save_note", {"title": "Groceries", "body": "milk, eggs — and \"bread\"",
                              "priority": 2})},
            {"role": "tool", "content": "saved"},
            {"role": "assistant", "content": "Done: the note is saved."},
            {"role": "user", "content": "Ping the server twice."},
            {"role": "assistant", "content": tool_call_text("ping", {}) + "\n" +
             tool_call_text("ping", {})},
            {"role": "tool", "content": "pong"},
            {"role": "tool", "content": "pong"},
        ],
        "options": {"add_generation_prompt": True},
    }
    yield {
        "name": "calculator_think_off_no_prompt",
        "tools": [CALC],
        "messages": [
            {"role": "user", "content": "What is 2 * (3 + 4)?"},
            {"role": "assistant",
             "content": tool_call_text("calculate", {"expression": "2 * (3 + 4)"})},
            {"role": "tool", "content": "14"},
            {"role": "assistant", "content": "2 * (3 + 4) = 14."},
        ],
        "options": {"add_generation_prompt": False, "enable_thinking": False},
    }
    # "/system_override" replaces the whole header: the tools do not appear.
    yield {
        "name": "system_override_hides_tools",
        "tools": [WEATHER, PING],
        "messages": [
            {"role": "system", "content": "/system_override Only answer in French."},
            {"role": "user", "content": "Weather?"},
        ],
        "options": {"add_generation_prompt": True},
    }


def render(env, template, case):
    tools = [{"type": "function",
              "function": {"name": t["name"], "description": t["description"],
                           "parameters": json.loads(t["parameters"])}}
             for t in case["tools"]]
    kwargs = {}
    if "enable_thinking" in case["options"]:
        kwargs["enable_thinking"] = case["options"]["enable_thinking"]
    return template.render(messages=case["messages"], tools=tools or None, documents=None,
                           add_generation_prompt=case["options"]["add_generation_prompt"],
                           **kwargs)


def main():
    gguf = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_GGUF
    env = make_environment()
    template = env.from_string(read_chat_template(gguf))
    out = []
    for case in cases():
        case["today"] = TODAY
        # Each tool's own rendering (the text between <tools> lines).
        case["tool_texts"] = [str({"type": "function",
                                   "function": {"name": t["name"], "description": t["description"],
                                                "parameters": json.loads(t["parameters"])}})
                              for t in case["tools"]]
        case["expected"] = render(env, template, case)
        # The calls in the assistant turns, in order, for the parser's round
        # trip; arguments as compact JSON with non-ASCII text raw (what
        # ToolCall::arguments holds).
        case["calls"] = [
            {"name": call["name"],
             "arguments": json.dumps(call["arguments"], separators=(",", ":"), ensure_ascii=False)}
            for m in case["messages"] if m["role"] == "assistant"
            for call in map(json.loads, re.findall(r"<tool_call>(.*?)</tool_call>", m["content"],
                                                   re.DOTALL))]
        for text in case["tool_texts"]:
            if "/system_override" not in case["messages"][0]["content"]:
                assert text + "\n" in case["expected"], case["name"]
        out.append(case)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(out)} cases to {OUT}")


if __name__ == "__main__":
    main()
