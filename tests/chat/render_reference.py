#!/usr/bin/env python3
"""Renders chat-template cases with Jinja2 exactly as transformers does; the reference that
lib/rl/model/chat is checked against (rl_chat_test runs it).

transformers (src/transformers/utils/chat_template_utils.py, _compile_jinja_template) renders
with ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[
AssistantTracker, jinja2.ext.loopcontrols]); its globals are raise_exception and strftime_now,
and it replaces the tojson filter with

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

apply_chat_template then calls render(messages=..., tools=..., documents=...,
add_generation_prompt=..., **special_tokens, **kwargs). AssistantTracker adds the
{% generation %} tag, which renders its body; a tiny extension here does the same.
strftime_now reads a fixed clock (the case's "now", seconds since the epoch, local time) so the
output is deterministic.

usage: render_reference.py CASES.json OUT.json
CASES.json: a list of {"template", "messages", "add_generation_prompt", "tools", "documents",
"variables", "now"}; OUT.json: a list of {"ok": true, "text": ...} or {"ok": false, "error": ...}.
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_env(now):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.fromtimestamp(now).strftime(fmt)
    return env


def render(case):
    env = make_env(case.get("now", 0))
    try:
        tpl = env.from_string(case["template"])
        text = tpl.render(messages=case.get("messages", []), tools=case.get("tools"),
                          documents=case.get("documents"),
                          add_generation_prompt=case.get("add_generation_prompt", False),
                          **case.get("variables", {}))
        return {"ok": True, "text": text}
    except Exception as e:  # every failure is a result to compare, not a crash
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump([render(c) for c in cases], f)


if __name__ == "__main__":
    main()
