#!/usr/bin/env python3
"""Generate jinja2_random.jsonl: random conversations rendered by Python Jinja2
set up the way transformers' apply_chat_template does (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False,
indent=...), raise_exception), with the official Llama-3.2 chat_template.
strftime_now is left undefined, as for the public goldens.

Usage: python3 crosscheck.py TOKENIZER_CONFIG N SEED [--kwargs] > jinja2_random.jsonl

With --kwargs the conversations also get random chat_template_kwargs
custom_tools (absent, null or a list that replaces tools) and
tools_in_user_message (absent, true or false), recorded as "custom_tools"
(raw JSON texts, null, or absent) and "tools_in_user_message".

Each line: {"messages": [...], "tools": [raw JSON text...] | null,
"add_generation_prompt": bool, "date_string": str | null,
"rendered": str | null, "error": str | null}. Tool-call arguments are stored
as raw JSON text (so number literals like 1E2 reach the Go side unchanged);
the Python side renders json.loads of that text.
"""
import json
import random
import sys

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise ValueError(message)


FRAGS = ["hello", " world", "  ", "\n", "\t", "\r\n", "\x1c", "\x1f", "\x85", "\xa0", "\u3000", "\u2028",
         "\ufeff", "\u200b", "<|eot_id|>", "<|start_header_id|>", "\"", "\\", "{\"name\": \"x\"}",
         "<>&", "caf\u00e9", "\u4f60\u597d", "\U0001F44B\U0001F3FD", "\x01", "\x7f", "'", "{", "}", "None", ""]


def rtext(r):
    return "".join(r.choice(FRAGS) for _ in range(r.randint(0, 6)))


NUMS = ["0", "-0", "1", "-17", "123456789012345678901234567890", "1.0", "1.50", "1E2", "1e16", "1e15",
        "1e-5", "0.0001", "-0.0", "3.14159", "2.5e-7", "1e400", "-1e400", "1e-400", "5e-324",
        "1.7976931348623157e308", "0.1e1", "100.000", "6.02214076e23"]


def rjson(r, depth=0):
    k = r.randint(0, 6 if depth < 3 else 3)
    if k == 0:
        return r.choice(["null", "true", "false"])
    if k in (1, 2):
        return r.choice(NUMS)
    if k == 3:
        return json.dumps(rtext(r), ensure_ascii=r.random() < 0.5)
    if k == 4:
        items = [rjson(r, depth + 1) for _ in range(r.randint(0, 3))]
        return "[" + r.choice([",", ", ", " ,\n "]).join(items) + "]"
    return robj(r, depth + 1)


def robj(r, depth=0):
    keys = [r.choice(["a", "b", "type", "name", "caf\u00e9", "k\"q", "z", "a"]) for _ in range(r.randint(0, 4))]
    return "{" + ",".join(json.dumps(k) + r.choice([":", ": ", " : "]) + rjson(r, depth) for k in keys) + "}"


def rmessage(r):
    role = r.choice(["system", "user", "user", "assistant", "assistant", "tool", "ipython"])
    m = {"role": role, "content": rtext(r)}
    if role == "assistant" and r.random() < 0.35:
        n = 1 if r.random() < 0.9 else r.choice([2, 3])
        m["tool_calls"] = [{"type": "function", "function": {"name": r.choice(["get_weather", "f", "x<|eot_id|>"]),
                                                             "arguments": robj(r)}} for _ in range(n)]
        if r.random() < 0.5:
            del m["content"]
    return m


def main():
    config, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kwargs = "--kwargs" in sys.argv[4:]
    template = json.load(open(config))["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(template)
    r = random.Random(seed)
    for _ in range(n):
        msgs = [rmessage(r) for _ in range(r.randint(1, 5))]
        tools = None
        if r.random() < 0.4:
            tools = [robj(r) for _ in range(r.randint(1, 3))]
        agp = r.random() < 0.5
        date = r.choice([None, None, "01 Dec 2024", "29 Nov 2026"])
        py_msgs = []
        for m in msgs:
            pm = dict(m)
            if "tool_calls" in m:
                pm["tool_calls"] = [{"type": "function", "function": {"name": c["function"]["name"],
                                                                       "arguments": json.loads(c["function"]["arguments"])}}
                                    for c in m["tool_calls"]]
            py_msgs.append(pm)
        kw = dict(messages=py_msgs, tools=None if tools is None else [json.loads(t) for t in tools],
                  add_generation_prompt=agp, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
        if date is not None:
            kw["date_string"] = date
        extra = {}
        if kwargs:
            c = r.random()
            if c < 0.15:
                extra["custom_tools"] = None
                kw["custom_tools"] = None
            elif c < 0.6:
                custom = [robj(r) for _ in range(r.randint(1, 3))]
                extra["custom_tools"] = custom
                kw["custom_tools"] = [json.loads(t) for t in custom]
            t = r.random()
            if t < 0.6:
                extra["tools_in_user_message"] = False
            elif t < 0.8:
                extra["tools_in_user_message"] = True
            if "tools_in_user_message" in extra:
                kw["tools_in_user_message"] = extra["tools_in_user_message"]
        rendered, err = None, None
        try:
            rendered = tmpl.render(**kw)
        except Exception as e:  # noqa: BLE001 - the template's raise_exception and Jinja errors
            err = str(e)
        print(json.dumps({"messages": msgs, "tools": tools, "add_generation_prompt": agp, "date_string": date,
                          **extra, "rendered": rendered, "error": err}, ensure_ascii=False))


if __name__ == "__main__":
    main()
