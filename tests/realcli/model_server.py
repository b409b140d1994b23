#!/usr/bin/env python3
"""A scripted model server for running the real agent CLIs offline.

Standard library only (Python 3.11). It speaks four wire formats:

  anthropic  POST /v1/messages (+ /v1/messages/count_tokens)       claude
  responses  POST /v1/responses                                    codex
  chat       POST /v1/chat/completions                             opencode
  gemini     POST /v1beta/models/<m>:streamGenerateContent?alt=sse,
             :generateContent, :countTokens                        gemini

The scenario is picked per request by the token PLAYDECK_SCENARIO=<name>
anywhere in the request body (the user's prompt carries it). Scenarios:
answer, tool, always-tool, spawn, auth, rate-limit, server-error,
overloaded, flaky, cut, slow (see README.md). No token: `answer`.

Usage: model_server.py --port 0 --port-file PATH [--log PATH]
                       [--stall-seconds 120] [--host 127.0.0.1]
POST /_reset clears the per-scenario request counters (used by `flaky`);
GET /_log returns the request log kept in memory.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

SCENARIO_RE = re.compile(r"PLAYDECK_SCENARIO=([A-Za-z0-9_-]+)")
# `listen`: what the operator said, when a message in the request says it.
SAID_RE = re.compile(r"OPERATOR_SAYS=([A-Za-z0-9_-]+)")
LISTEN_SLEEP = "sleep 4"
CWD_RES = [
    re.compile(r"<cwd>\s*(/[^<\s]+)\s*</cwd>"),
    re.compile(r"[Ww]orking directory:\s*(/[^\s<\"']+)"),
    re.compile(r"working in the directory:?\s*(/[^\s<\"']+)"),
    re.compile(r"[Cc]urrent (?:working )?directory[^/\n]{0,40}(/[^\s<\"']+)"),
    re.compile(r"PLAYDECK_CWD=(/[^\s<\"']+)"),
]
KNOWN = {
    "answer", "tool", "always-tool", "spawn", "auth", "rate-limit",
    "server-error", "overloaded", "flaky", "cut", "slow", "limit-after-tool",
    "listen", "review",
}

USAGE = {"input": 1200, "cached": 1000, "output": 40}
ANSWER_TEXT = "The answer is 42."
TOOL_DONE_TEXT = "I created hello.txt containing hi."
SPAWN_TEXT = (
    "The parser has no tests, so I am asking for someone to write them.\n\n"
    "```json\n"
    + json.dumps(
        {
            "spawn_request": {
                "instruction": "write the tests for the parser",
                "reason": "tests were missing",
            }
        },
        indent=2,
    )
    + "\n```\n"
)

STATE = {"counts": {}, "log": []}
LOCK = threading.Lock()
ARGS = None
LOG_FILE = None


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


def strings_of(v, out):
    """Every string inside a JSON value, depth first."""
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, dict):
        for x in v.values():
            strings_of(x, out)
    elif isinstance(v, list):
        for x in v:
            strings_of(x, out)
    return out


def find_scenario(raw_text):
    m = SCENARIO_RE.search(raw_text)
    if not m:
        return "answer"
    s = m.group(1)
    return s if s in KNOWN else "answer"


def find_cwd(texts):
    joined = "\n".join(texts)
    for r in CWD_RES:
        m = r.search(joined)
        if m:
            return m.group(1).rstrip(".,;:)")
    return None


# ---------------------------------------------------------------- tools


def normalize_tools(fmt, body):
    """[(name, schema, kind)] with kind function | custom | local_shell."""
    out = []
    tools = body.get("tools") or []
    if fmt == "anthropic":
        for t in tools:
            if "input_schema" in t:
                out.append((t.get("name", ""), t.get("input_schema") or {}, "function"))
    elif fmt == "responses":
        for t in tools:
            ty = t.get("type")
            if ty == "function":
                out.append((t.get("name", ""), t.get("parameters") or {}, "function"))
            elif ty == "custom":
                out.append((t.get("name", ""), {}, "custom"))
            elif ty == "local_shell":
                out.append(("local_shell", {}, "local_shell"))
    elif fmt == "chat":
        for t in tools:
            f = t.get("function") or {}
            out.append((f.get("name", ""), f.get("parameters") or {}, "function"))
    elif fmt == "gemini":
        for t in tools:
            for f in t.get("functionDeclarations") or t.get("function_declarations") or []:
                schema = f.get("parametersJsonSchema") or f.get("parameters") or {}
                out.append((f.get("name", ""), schema, "function"))
    return out


WRITE_NAMES = ["Write", "write", "write_file", "create_file", "WriteFile", "create"]
PATCH_NAMES = ["apply_patch"]
SHELL_NAMES = [
    "Bash", "bash", "shell", "shell_command", "exec_command", "run_shell_command",
    "local_shell", "run_terminal_cmd",
]
READ_NAMES = [
    "Glob", "glob", "LS", "ls", "list", "list_directory", "list_dir",
    "Read", "read", "read_file", "view",
]
PATH_KEYS = {"file_path", "path", "filepath", "filePath", "absolute_path", "file",
             "dir_path", "directory", "target_file"}
CONTENT_KEYS = {"content", "contents", "text", "file_text"}


def props_of(schema):
    return (schema or {}).get("properties") or {}


def fill_args(schema, path_value, content_value=None, command=None, pattern="*"):
    """Arguments for a tool from its JSON schema: paths, contents, commands,
    then defaults for any other required property."""
    props = props_of(schema)
    required = set((schema or {}).get("required") or [])
    args = {}
    for k, p in props.items():
        ty = p.get("type") if isinstance(p, dict) else None
        if isinstance(ty, list):
            ty = next((x for x in ty if x != "null"), "string")
        if k in PATH_KEYS or k.lower().endswith("path"):
            args[k] = path_value
        elif k in CONTENT_KEYS and content_value is not None:
            args[k] = content_value
        elif k in ("command", "cmd") and command is not None:
            args[k] = ["bash", "-lc", command] if ty == "array" else command
        elif k == "pattern":
            args[k] = pattern
        elif k == "description" and k in required:
            args[k] = "playdeck scripted call"
        elif k in required:
            if ty == "string":
                args[k] = ""
            elif ty in ("integer", "number"):
                args[k] = 1
            elif ty == "boolean":
                args[k] = False
            elif ty == "array":
                args[k] = []
            elif ty == "object":
                args[k] = {}
    return args


def pick_write_call(tools, cwd, file="hello.txt", text="hi"):
    by = {n: (n, s, k) for n, s, k in tools}
    target_abs = os.path.join(cwd, file) if cwd else file
    for n in WRITE_NAMES:
        if n in by:
            name, schema, kind = by[n]
            args = fill_args(schema, target_abs, content_value=text)
            if any(k in CONTENT_KEYS for k in args):
                return name, kind, args
    call = pick_shell_call(tools, cwd, f"printf {text} > {file}")
    if call:
        return call
    for n in PATCH_NAMES:
        if n in by:
            name, schema, kind = by[n]
            patch = f"*** Begin Patch\n*** Add File: {file}\n+{text}\n*** End Patch\n"
            if kind == "custom":
                return name, kind, patch
            return name, kind, {"input": patch}
    return None


def pick_harmless_call(tools, cwd):
    by = {n: (n, s, k) for n, s, k in tools}
    for n in READ_NAMES:
        if n in by:
            name, schema, kind = by[n]
            if n in ("Read", "read", "read_file", "view"):
                # Reading a file that may not exist is still harmless.
                path = os.path.join(cwd, "README.txt") if cwd else "README.txt"
            else:
                path = cwd or "."
            args = fill_args(schema, path, pattern="*")
            return name, kind, args
    for n in SHELL_NAMES:
        if n in by:
            name, schema, kind = by[n]
            if kind == "local_shell":
                return name, kind, {"command": ["true"]}
            args = fill_args(schema, cwd or ".", command="true")
            if "workdir" in props_of(schema) and cwd:
                args["workdir"] = cwd
            return name, kind, args
    return None


def pick_shell_call(tools, cwd, cmd):
    by = {n: (n, s, k) for n, s, k in tools}
    for n in SHELL_NAMES:
        if n in by:
            name, schema, kind = by[n]
            if kind == "local_shell":
                return name, kind, {"command": ["bash", "-lc", cmd]}
            args = fill_args(schema, cwd or ".", command=cmd)
            if "workdir" in props_of(schema) and cwd:
                args["workdir"] = cwd
            if any(k in ("command", "cmd") for k in args):
                return name, kind, args
    return None


def has_tool_result(fmt, body):
    if fmt == "anthropic":
        msgs = body.get("messages") or []
        if not msgs:
            return False
        last = msgs[-1]
        c = last.get("content")
        return last.get("role") == "user" and isinstance(c, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in c)
    if fmt == "responses":
        for item in reversed(body.get("input") or []):
            ty = item.get("type", "")
            if ty.endswith("call_output"):
                return True
            if item.get("role") == "user" or ty == "message" and item.get("role") == "user":
                return False
        return False
    if fmt == "chat":
        msgs = body.get("messages") or []
        return bool(msgs) and msgs[-1].get("role") == "tool"
    if fmt == "gemini":
        cs = body.get("contents") or []
        if not cs:
            return False
        return any("functionResponse" in p for p in cs[-1].get("parts") or [])
    return False


def newest_is_tool_result(fmt, body):
    """Whether the newest thing in the request is a tool's result (not a
    user's words after it: a continued session adds those)."""
    if not has_tool_result(fmt, body):
        return False
    if fmt == "anthropic":
        c = body["messages"][-1].get("content")
        return isinstance(c[-1], dict) and c[-1].get("type") == "tool_result"
    if fmt == "gemini":
        parts = body["contents"][-1].get("parts") or []
        return not any(p.get("text") for p in parts if isinstance(p, dict))
    return True


def earlier_tool_calls(fmt, body):
    """How many tool calls of the model's the request carries back."""
    n = 0
    if fmt == "anthropic":
        for m in body.get("messages") or []:
            c = m.get("content")
            if m.get("role") == "assistant" and isinstance(c, list):
                n += sum(1 for b in c if isinstance(b, dict) and b.get("type") == "tool_use")
    elif fmt == "responses":
        n = sum(1 for i in body.get("input") or []
                if i.get("type") in ("function_call", "custom_tool_call", "local_shell_call"))
    elif fmt == "chat":
        n = sum(len(m.get("tool_calls") or []) for m in body.get("messages") or []
                if m.get("role") == "assistant")
    elif fmt == "gemini":
        for c in body.get("contents") or []:
            n += sum(1 for p in c.get("parts") or [] if isinstance(p, dict) and "functionCall" in p)
    return n


def last_tool_result(fmt, body):
    """The text of the newest tool result in the request (for the log)."""
    if not has_tool_result(fmt, body):
        return None
    if fmt == "anthropic":
        item = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"][-1]
    elif fmt == "responses":
        item = [i for i in body["input"] if i.get("type", "").endswith("call_output")][-1]
    elif fmt == "chat":
        item = body["messages"][-1]
    else:
        item = [p for p in body["contents"][-1]["parts"] if "functionResponse" in p][-1]
    return " ".join(strings_of(item, []))[:300]


def plan(fmt, body, scenario):
    """('text', str) or ('tool', name, kind, args)."""
    tools = normalize_tools(fmt, body)
    texts = strings_of(body, [])
    cwd = find_cwd(texts)
    if scenario == "spawn":
        return ("text", SPAWN_TEXT)
    if scenario == "tool":
        if has_tool_result(fmt, body):
            return ("text", TOOL_DONE_TEXT)
        call = pick_write_call(tools, cwd)
        if call:
            return ("tool",) + call
        return ("text", "I have no tool that writes files.")
    if scenario == "limit-after-tool":
        # The tool's result itself is refused (a 429, in do_POST); a turn
        # that carries the call back with words after it is answered.
        if earlier_tool_calls(fmt, body):
            return ("text", TOOL_DONE_TEXT)
        call = pick_write_call(tools, cwd)
        if call:
            return ("tool",) + call
        return ("text", "I have no tool that writes files.")
    if scenario == "listen":
        # A slow command first (the operator speaks while it runs); an
        # answer that says what the operator said, once a message in the
        # conversation carries it; else that it listens.
        said = SAID_RE.search("\n".join(texts))
        if said:
            return ("text", f"I heard: {said.group(1)}.")
        if earlier_tool_calls(fmt, body):
            return ("text", "I am listening.")
        call = pick_shell_call(tools, cwd, LISTEN_SLEEP)
        if call:
            return ("tool",) + call
        return ("text", "I have no shell to wait in.")
    if scenario == "review":
        # Its work goes to review. Sent back with a note that says
        # OPERATOR_SAYS=<word>, it writes <word>.txt holding the word (a
        # new file: a CLI may refuse to overwrite one it has not read).
        if newest_is_tool_result(fmt, body):
            return ("text", "Done: the file is written.")
        said = SAID_RE.search("\n".join(texts))
        word = said.group(1) if said else None
        call = (pick_write_call(tools, cwd, f"{word}.txt", word) if word
                else pick_write_call(tools, cwd))
        if call:
            return ("tool",) + call
        return ("text", "I have no tool that writes files.")
    if scenario == "always-tool":
        call = pick_harmless_call(tools, cwd)
        if call:
            return ("tool",) + call
        return ("text", "I have no harmless tool to call.")
    return ("text", ANSWER_TEXT)


# ---------------------------------------------------------------- errors


def http_date_in(seconds):
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def error_response(fmt, scenario):
    """(status, headers, body dict) for an error scenario, else None."""
    if scenario == "auth":
        if fmt == "anthropic":
            return 401, {}, {"type": "error", "error": {
                "type": "authentication_error", "message": "invalid x-api-key"},
                "request_id": new_id("req_")}
        if fmt in ("responses", "chat"):
            return 401, {}, {"error": {
                "message": "Incorrect API key provided: fake. You can find your API key at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
        return 401, {}, {"error": {
            "code": 401,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "UNAUTHENTICATED"}}
    if scenario == "rate-limit":
        reset = http_date_in(30)
        if fmt == "anthropic":
            return 429, {
                "retry-after": "30",
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": reset,
                "anthropic-ratelimit-tokens-limit": "40000",
                "anthropic-ratelimit-tokens-remaining": "0",
                "anthropic-ratelimit-tokens-reset": reset,
                "anthropic-ratelimit-input-tokens-reset": reset,
                "anthropic-ratelimit-output-tokens-reset": reset,
            }, {"type": "error", "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed the rate limit for your organization of 50 requests per minute. Please try again later."},
                "request_id": new_id("req_")}
        if fmt in ("responses", "chat"):
            return 429, {
                "retry-after": "30",
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "30s",
                "x-ratelimit-limit-tokens": "30000",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "30s",
            }, {"error": {
                "message": "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 30s.",
                "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
        return 429, {"retry-after": "30"}, {"error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED"}}
    if scenario in ("server-error", "flaky"):
        if fmt == "anthropic":
            return 500, {}, {"type": "error", "error": {
                "type": "api_error", "message": "Internal server error"},
                "request_id": new_id("req_")}
        if fmt in ("responses", "chat"):
            return 500, {}, {"error": {
                "message": "The server had an error while processing your request. Sorry about that!",
                "type": "server_error", "param": None, "code": None}}
        return 500, {}, {"error": {
            "code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}
    if scenario == "overloaded":
        if fmt == "anthropic":
            return 529, {}, {"type": "error", "error": {
                "type": "overloaded_error", "message": "Overloaded"},
                "request_id": new_id("req_")}
        if fmt in ("responses", "chat"):
            return 503, {}, {"error": {
                "message": "The server is overloaded or not ready yet.",
                "type": "server_error", "param": None, "code": "server_overloaded"}}
        return 503, {}, {"error": {
            "code": 503, "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE"}}
    return None


# ---------------------------------------------------------------- formats
# Each builder returns a list of (event name or None, data dict or str)
# for streaming, and a dict for a non-streaming reply.


def split_text(t):
    """A few deltas, so clients see streaming."""
    n = max(1, len(t) // 3)
    return [t[i:i + n] for i in range(0, len(t), n)]


def anthropic_events(body, p):
    model = body.get("model", "claude-sonnet-4-5")
    mid = new_id("msg_")
    ev = [("message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": USAGE["input"] - USAGE["cached"],
                  "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": USAGE["cached"],
                  "output_tokens": 1}}})]
    if p[0] == "text":
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}))
        ev.append(("ping", {"type": "ping"}))
        for d in split_text(p[1]):
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": d}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        stop = "end_turn"
    else:
        _, name, _kind, args = p
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use", "id": new_id("toolu_"),
                                                             "name": name, "input": {}}}))
        js = json.dumps(args)
        for d in split_text(js):
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta", "partial_json": d}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        stop = "tool_use"
    ev.append(("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": USAGE["output"]}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return ev


def anthropic_whole(body, p):
    model = body.get("model", "claude-sonnet-4-5")
    if p[0] == "text":
        content = [{"type": "text", "text": p[1]}]
        stop = "end_turn"
    else:
        content = [{"type": "tool_use", "id": new_id("toolu_"), "name": p[1], "input": p[3]}]
        stop = "tool_use"
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": USAGE["input"] - USAGE["cached"],
                      "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": USAGE["cached"],
                      "output_tokens": USAGE["output"]}}


def responses_usage():
    return {"input_tokens": USAGE["input"],
            "input_tokens_details": {"cached_tokens": USAGE["cached"]},
            "output_tokens": USAGE["output"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE["input"] + USAGE["output"]}


def responses_events(body, p):
    model = body.get("model", "gpt-5")
    rid = new_id("resp_")
    base = {"id": rid, "object": "response", "created_at": int(time.time()),
            "model": model, "status": "in_progress", "output": []}
    ev = [("response.created", {"type": "response.created", "sequence_number": 0,
                                "response": base})]
    ev.append(("response.in_progress", {"type": "response.in_progress", "response": base}))
    if p[0] == "text":
        iid = new_id("msg_")
        ev.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "message", "id": iid, "status": "in_progress", "role": "assistant", "content": []}}))
        ev.append(("response.content_part.added", {"type": "response.content_part.added", "item_id": iid,
                   "output_index": 0, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}))
        for d in split_text(p[1]):
            ev.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": iid,
                       "output_index": 0, "content_index": 0, "delta": d}))
        ev.append(("response.output_text.done", {"type": "response.output_text.done", "item_id": iid,
                   "output_index": 0, "content_index": 0, "text": p[1]}))
        item = {"type": "message", "id": iid, "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": p[1], "annotations": []}]}
    else:
        _, name, kind, args = p
        cid = new_id("call_")
        if kind == "custom":
            item = {"type": "custom_tool_call", "id": new_id("ctc_"), "status": "completed",
                    "call_id": cid, "name": name, "input": args}
        elif kind == "local_shell":
            item = {"type": "local_shell_call", "id": new_id("lsh_"), "status": "completed",
                    "call_id": cid, "action": {"type": "exec", "command": args["command"],
                                               "env": {}}}
        else:
            item = {"type": "function_call", "id": new_id("fc_"), "status": "completed",
                    "call_id": cid, "name": name, "arguments": json.dumps(args)}
        added = dict(item, status="in_progress")
        ev.append(("response.output_item.added", {"type": "response.output_item.added",
                                                  "output_index": 0, "item": added}))
    ev.append(("response.output_item.done", {"type": "response.output_item.done",
                                             "output_index": 0, "item": item}))
    done = dict(base, status="completed", output=[item], usage=responses_usage())
    ev.append(("response.completed", {"type": "response.completed", "response": done}))
    return ev


def responses_whole(body, p):
    ev = responses_events(body, p)
    return ev[-1][1]["response"]


def chat_usage():
    return {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
            "total_tokens": USAGE["input"] + USAGE["output"],
            "prompt_tokens_details": {"cached_tokens": USAGE["cached"]},
            "completion_tokens_details": {"reasoning_tokens": 0}}


def chat_events(body, p):
    model = body.get("model", "gpt-4o")
    cid = new_id("chatcmpl-")
    created = int(time.time())

    def chunk(delta, finish=None, usage=None, choices=True):
        d = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []}
        if usage is not None:
            d["usage"] = usage
        return (None, d)

    ev = [chunk({"role": "assistant", "content": ""})]
    if p[0] == "text":
        for d in split_text(p[1]):
            ev.append(chunk({"content": d}))
        ev.append(chunk({}, "stop"))
    else:
        _, name, _kind, args = p
        js = json.dumps(args)
        parts = split_text(js)
        ev.append(chunk({"tool_calls": [{"index": 0, "id": new_id("call_"), "type": "function",
                                         "function": {"name": name, "arguments": parts[0]}}]}))
        for d in parts[1:]:
            ev.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": d}}]}))
        ev.append(chunk({}, "tool_calls"))
    ev.append(chunk(None, usage=chat_usage(), choices=False))
    ev.append((None, "[DONE]"))
    return ev


def chat_whole(body, p):
    model = body.get("model", "gpt-4o")
    if p[0] == "text":
        msg = {"role": "assistant", "content": p[1]}
        finish = "stop"
    else:
        msg = {"role": "assistant", "content": None, "tool_calls": [{
            "id": new_id("call_"), "type": "function",
            "function": {"name": p[1], "arguments": json.dumps(p[3])}}]}
        finish = "tool_calls"
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": chat_usage()}


def gemini_usage():
    return {"promptTokenCount": USAGE["input"], "cachedContentTokenCount": USAGE["cached"],
            "candidatesTokenCount": USAGE["output"],
            "totalTokenCount": USAGE["input"] + USAGE["output"]}


def gemini_json_answer(body):
    """Gemini CLI's side calls (next speaker, routing, loop checks) ask for
    JSON; one object that answers all of them."""
    gc = body.get("generationConfig") or body.get("generation_config") or {}
    if gc.get("responseMimeType") == "application/json" or gc.get("responseJsonSchema") or gc.get("responseSchema"):
        return json.dumps({"reasoning": "The model answered; the user speaks next.",
                           "next_speaker": "user", "model_choice": "flash",
                           "is_stuck": False, "confidence": 0.0, "unproductive_state_confidence": 0.0,
                           "unproductive_state_analysis": "none",
                           "complexity_reasoning": "A short answer.", "complexity_score": 10})
    return None


def gemini_events(body, p, model):
    if p[0] == "text":
        chunks = split_text(p[1])
        ev = []
        for i, d in enumerate(chunks):
            c = {"content": {"parts": [{"text": d}], "role": "model"}, "index": 0}
            if i == len(chunks) - 1:
                c["finishReason"] = "STOP"
            item = {"candidates": [c], "modelVersion": model, "responseId": new_id("")}
            if i == len(chunks) - 1:
                item["usageMetadata"] = gemini_usage()
            ev.append((None, item))
        return ev
    _, name, _kind, args = p
    return [(None, {"candidates": [{"content": {"parts": [{"functionCall": {"name": name, "args": args}}],
                                                "role": "model"}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": gemini_usage(), "modelVersion": model,
                    "responseId": new_id("")})]


def gemini_whole(body, p, model):
    ev = gemini_events(body, p, model)
    parts = []
    for _, d in ev:
        parts.extend(d["candidates"][0]["content"]["parts"])
    if p[0] == "text":
        parts = [{"text": p[1]}]
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP",
                            "index": 0}], "usageMetadata": gemini_usage(), "modelVersion": model}


# ---------------------------------------------------------------- server


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "playdeck-model-server/1"

    def log_message(self, fmt, *a):  # quiet
        pass

    def record(self, fmt, scenario, status, note="", tools=None):
        entry = {"time": round(time.time(), 3), "method": self.command, "path": self.path,
                 "format": fmt, "scenario": scenario, "status": status}
        if tools:
            entry["tools"] = tools
        if note:
            entry["note"] = note
        with LOCK:
            STATE["log"].append(entry)
            if LOG_FILE:
                with open(LOG_FILE, "a") as f:
                    f.write(json.dumps(entry) + "\n")

    # -- plain replies

    def send_json(self, status, obj, headers=None, scenario=None):
        """A whole JSON reply; `cut` sends half of it and closes, `slow`
        stalls before the body."""
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", new_id("req_"))
        self.send_header("x-request-id", new_id("req_"))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            self.wfile.flush()
            return "ok"
        try:
            if scenario == "cut":
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return "cut"
            if scenario == "slow":
                self.wfile.flush()
                time.sleep(ARGS.stall_seconds)
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return "client-gone"
        return "ok"

    # -- SSE with chunked transfer encoding

    def start_sse(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.send_header("request-id", new_id("req_"))
        self.send_header("x-request-id", new_id("req_"))
        self.end_headers()
        self.close_connection = True

    def chunk(self, data: bytes):
        if not data:
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def sse_bytes(name, data):
        s = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}\n" if name else ""
        return (head + f"data: {s}\n\n").encode()

    def stream(self, events, scenario):
        """Sends events; `cut` and `slow` misbehave on purpose."""
        self.start_sse()
        try:
            if scenario == "cut":
                first = self.sse_bytes(*events[0])
                self.chunk(first)
                half = self.sse_bytes(*events[1]) if len(events) > 1 else first
                self.chunk(half[: len(half) // 2])
                # Close without the terminating chunk: a broken transfer.
                self.wfile.flush()
                self.connection.shutdown(2)
                return "cut"
            for i, (name, data) in enumerate(events):
                self.chunk(self.sse_bytes(name, data))
                if scenario == "slow" and i == 0:
                    time.sleep(ARGS.stall_seconds)
            self.end_chunks()
            return "ok"
        except (BrokenPipeError, ConnectionResetError, OSError):
            return "client-gone"

    # -- routing

    def read_body(self):
        n = int(self.headers.get("content-length") or 0)
        if n:
            return self.rfile.read(n)
        if (self.headers.get("transfer-encoding") or "").lower() == "chunked":
            out = b""
            while True:
                line = self.rfile.readline().strip()
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                out += self.rfile.read(size)
                self.rfile.readline()
            return out
        return b""

    def do_HEAD(self):
        self.send_json(200, {})
        self.record(None, None, 200, "probe")

    def do_GET(self):
        path = urlparse(self.path).path
        if path == "/_log":
            with LOCK:
                self.send_json(200, STATE["log"])
            return
        if path.rstrip("/") in ("", "/v1", "/health", "/healthz"):
            self.send_json(200, {"status": "ok"})
            self.record(None, None, 200, "probe")
            return
        if path.endswith("/models") or path.startswith("/v1beta/models") and ":" not in path:
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "playdeck",
                     "type": "model", "display_name": m}
                    for m in ("claude-sonnet-4-5", "gpt-5", "playdeck-model", "gemini-2.5-pro")]
            self.send_json(200, {"object": "list", "data": data, "models": [], "has_more": False})
            self.record(None, None, 200, "models")
            return
        self.send_json(404, {"error": {"message": f"no route {path}", "type": "not_found_error"}})
        self.record(None, None, 404, "unknown GET")

    def do_DELETE(self):
        self.send_json(404, {"error": {"message": "no route", "type": "not_found_error"}})

    def do_POST(self):
        raw = self.read_body()
        path = urlparse(self.path).path
        if path == "/_reset":
            with LOCK:
                STATE["counts"].clear()
            self.send_json(200, {"reset": True})
            return
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text) if text.strip() else {}
        except ValueError:
            body = {}
        scenario = find_scenario(text)
        fmt_guess = ("anthropic" if path.endswith("/messages") else "responses" if path.endswith("/responses")
                     else "chat" if path.endswith("/chat/completions") else "gemini")
        tool_names = [n for n, _, _ in normalize_tools(fmt_guess, body)] if isinstance(body, dict) else []

        if path.endswith("/messages/count_tokens"):
            self.send_json(200, {"input_tokens": USAGE["input"]})
            self.record("anthropic", scenario, 200, "count_tokens")
            return
        if path.endswith(":countTokens"):
            self.send_json(200, {"totalTokens": USAGE["input"]})
            self.record("gemini", scenario, 200, "countTokens")
            return
        if path.endswith("/messages"):
            fmt = "anthropic"
        elif path.endswith("/responses"):
            fmt = "responses"
        elif path.endswith("/chat/completions"):
            fmt = "chat"
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            fmt = "gemini"
        else:
            self.send_json(404, {"error": {"message": f"no route {path}", "type": "not_found_error"}})
            self.record(None, scenario, 404, "unknown POST")
            return

        # A side call (a title, claude's topic check, Gemini CLI's routing
        # and next-speaker checks) offers no tools. `flaky` fails the first
        # agent turn, so side calls neither count nor fail for it.
        side_call = not tool_names or (fmt == "gemini" and gemini_json_answer(body) is not None)
        if side_call and scenario == "flaky":
            scenario_key = "flaky-side"
        else:
            scenario_key = scenario
        with LOCK:
            key = f"{scenario_key}/{fmt}"
            STATE["counts"][key] = STATE["counts"].get(key, 0) + 1
            nth = STATE["counts"][key]

        err = error_response(fmt, scenario)
        if scenario == "limit-after-tool" and not side_call and newest_is_tool_result(fmt, body):
            status, headers, obj = error_response(fmt, "rate-limit")
            headers = dict(headers, **{"retry-after": "1"})
            self.send_json(status, obj, headers)
            self.record(fmt, scenario, status, f"request {nth}: the tool's result refused", tool_names)
            return
        if err and not (scenario == "flaky" and (nth > 1 or side_call)):
            status, headers, obj = err
            self.send_json(status, obj, headers)
            self.record(fmt, scenario, status, f"request {nth}", tool_names)
            return

        p = plan(fmt, body, scenario)
        tr = last_tool_result(fmt, body)
        streaming = bool(body.get("stream")) or ":streamGenerateContent" in path or (
            fmt == "responses" and body.get("stream", True))
        note = (f"request {nth}{'' if streaming else ' (not streaming)'}: "
                + ("text" if p[0] == "text" else f"tool {p[1]}"))
        if fmt == "anthropic":
            if streaming:
                r = self.stream(anthropic_events(body, p), scenario)
            else:
                r = self.send_json(200, anthropic_whole(body, p), scenario=scenario)
        elif fmt == "responses":
            if body.get("stream", True):
                r = self.stream(responses_events(body, p), scenario)
            else:
                r = self.send_json(200, responses_whole(body, p), scenario=scenario)
        elif fmt == "chat":
            if body.get("stream"):
                r = self.stream(chat_events(body, p), scenario)
            else:
                r = self.send_json(200, chat_whole(body, p), scenario=scenario)
        else:
            model = path.split("/models/")[-1].split(":")[0]
            js = gemini_json_answer(body)
            if js is not None:
                p = ("text", js)
                note = f"request {nth}: json side call"
            if ":streamGenerateContent" in path:
                r = self.stream(gemini_events(body, p, model), scenario)
            else:
                r = self.send_json(200, gemini_whole(body, p, model), scenario=scenario)
        if tr is not None:
            note += f"; tool result: {tr}"
        if scenario == "limit-after-tool":
            note += f"; earlier tool calls: {earlier_tool_calls(fmt, body)}"
        self.record(fmt, scenario, 200, note + ("" if r == "ok" else f" ({r})"), tool_names)


def main():
    global ARGS, LOG_FILE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--stall-seconds", type=float, default=120.0)
    ARGS = ap.parse_args()
    LOG_FILE = ARGS.log
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, ARGS.port_file)
    print(f"model server listening on http://{ARGS.host}:{port}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
