#!/usr/bin/env python3
"""Runs every installed real agent CLI x version x scenario against
model_server.py and saves what it printed.

  tests/realcli/install.sh            # first
  python3 tests/realcli/capture.py [--cli claude] [--version 2.1.332]
                                   [--scenario tool] [--timeout 90]

Each run gets a fresh temp dir: <tmp>/home (HOME, the CLI's config) and
<tmp>/work (a `git init`ed working directory). stdout goes to
captures/<cli>/<version>/<scenario>.jsonl, the rest to
<scenario>.meta.json: cli, version, scenario, argv and env (temp paths and
the port replaced by <WORK>, <HOME>, <PORT>, the install dir by <CLI_DIR>),
exit code, seconds, stderr (tail), whether hello.txt exists and what it
holds, and the model server's log for the run.

Standard library only. The configs written for each CLI are the ones
README.md documents.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
INSTALL = os.path.join(ROOT, "target", "realcli")
CAPTURES = os.path.join(HERE, "captures")

SCENARIOS = [
    "answer", "tool", "tool-readonly", "always-tool", "spawn", "auth", "rate-limit",
    "server-error", "overloaded", "flaky", "cut", "slow",
    # claude only: `tool` as playdeck runs it, with the partial-message
    # deltas the follow view assembles.
    "tool-partial",
]
INSTRUCTIONS = {
    "tool": "Create the file hello.txt containing hi in the current directory.",
    "tool-readonly": "Create the file hello.txt containing hi in the current directory.",
    "tool-partial": "Create the file hello.txt containing hi in the current directory.",
    "always-tool": "List the files in the current directory, again and again.",
    "spawn": "Look at the parser and ask for help if tests are missing.",
}
# How long a CLI without a turn limit loops in `always-tool` (they start
# in 1 s, 5 s, 15 s...).
ALWAYS_TOOL_SECONDS = {"codex": 4, "copilot": 6, "gemini": 15, "opencode": 30}
OPENCODE_RETRY_SECONDS = 45
STALL_SECONDS = 3  # the server's stall for `slow` in captures


def server_scenario(s):
    return "tool" if s in ("tool-readonly", "tool-partial") else s


# ------------------------------------------------------------ per CLI setup
# Each returns (argv, env) for one run; `home`/`work` exist already.


def base_env(home):
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
        "TMPDIR": os.path.join(home, "tmp"),
    }


def claude_setup(exe, version, scenario, prompt, home, work, port):
    env = base_env(home)
    env.update({
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # Its own retries (5xx, 429, 529, connection errors): off.
        # (one for `flaky`, to show the recovery).
        "CLAUDE_CODE_MAX_RETRIES": "1" if scenario == "flaky" else "0",
        # An idle stream is aborted after this many ms (2.1.x).
        "CLAUDE_STREAM_IDLE_TIMEOUT_MS": "10000",
        "API_TIMEOUT_MS": "30000",
    })
    argv = [exe, "-p", prompt]
    # playdeck's translation of a ToolSet (src/agents/argv.rs), with the
    # tools it would list.
    if scenario == "tool-readonly":
        argv += ["--allowedTools", "Read,Glob,Grep", "--max-turns", "4",
                 "--permission-mode", "default",
                 "--disallowedTools", "Edit,MultiEdit,Write,NotebookEdit"]
    elif scenario == "always-tool":
        argv += ["--allowedTools", "Read,Glob,Grep,Bash", "--max-turns", "2",
                 "--permission-mode", "acceptEdits"]
    else:
        argv += ["--allowedTools", "Read,Glob,Grep,Edit,Write,Bash", "--max-turns", "4",
                 "--permission-mode", "acceptEdits"]
    argv += ["--verbose", "--output-format", "stream-json"]
    if scenario == "tool-partial":
        argv += ["--include-partial-messages"]
    return argv, env


def codex_setup(exe, version, scenario, prompt, home, work, port):
    env = base_env(home)
    codex_home = os.path.join(home, ".codex")
    os.makedirs(codex_home, exist_ok=True)
    retries = 1 if scenario == "flaky" else 0
    model = "gpt-5.5" if not version.startswith("0.4") else "gpt-5-codex"
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(f"""model = "{model}"
model_provider = "playdeck"
check_for_update_on_startup = false

[model_providers.playdeck]
name = "playdeck"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "PLAYDECK_API_KEY"
request_max_retries = {retries}
stream_max_retries = {retries}
stream_idle_timeout_ms = 10000

[analytics]
enabled = false
""")
    env.update({"CODEX_HOME": codex_home, "PLAYDECK_API_KEY": "fake"})
    sandbox = "read-only" if scenario == "tool-readonly" else "workspace-write"
    argv = [exe, "exec", "--skip-git-repo-check", prompt, "-s", sandbox, "--json"]
    return argv, env


def opencode_setup(exe, version, scenario, prompt, home, work, port):
    env = base_env(home)
    cfg = {
        "$schema": "https://opencode.ai/config.json",
        "model": "playdeck/playdeck-model",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "playdeck": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "playdeck scripted server",
                "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "fake",
                            "includeUsage": True},
                "models": {"playdeck-model": {"name": "playdeck model",
                                              "limit": {"context": 200000, "output": 8192}}},
            }
        },
    }
    if scenario == "tool-readonly":
        # playdeck's translation: OPENCODE_CONFIG_CONTENT.
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps({"permission": {
            "edit": "deny", "bash": "deny", "external_directory": "deny"}})
    else:
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps({"permission": {
            "edit": "allow", "bash": "allow", "external_directory": "deny"}})
    with open(os.path.join(work, "opencode.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    env.update({
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    })
    # The provider SDK (@ai-sdk/openai-compatible) is bundled in 1.18; 1.0
    # installs it at run time, so install.sh seeds its cache (README.md).
    seed = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(exe))), "opencode-cache")
    if os.path.isdir(seed):
        shutil.copytree(seed, os.path.join(home, ".cache", "opencode"), dirs_exist_ok=True,
                        symlinks=True, ignore=shutil.ignore_patterns("install.log"))
    argv = [exe, "run", prompt, "--format", "json"]
    return argv, env


def gemini_setup(exe, version, scenario, prompt, home, work, port):
    env = base_env(home)
    gdir = os.path.join(home, ".gemini")
    os.makedirs(gdir, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        # Its own retries: 1 attempt (2 for `flaky`); the default is 10
        # attempts from a 5 s delay.
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True,
                    "maxAttempts": 2 if scenario == "flaky" else 1,
                    "checkpointing": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False},
        "model": {"name": "gemini-2.5-pro"},
        # 0.11-era flat keys
        "selectedAuthType": "gemini-api-key",
        "usageStatisticsEnabled": False,
        "disableAutoUpdate": True,
        "disableUpdateNag": True,
    }
    with open(os.path.join(gdir, "settings.json"), "w") as f:
        json.dump(settings, f, indent=2)
    env.update({
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
        "GEMINI_API_KEY": "fake",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GEMINI_TELEMETRY_ENABLED": "false",
        # 0.61 refuses to run headless in an untrusted folder (exit 55).
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    })
    mode = {"tool-readonly": "default"}.get(scenario, "auto_edit" if scenario != "always-tool" else "yolo")
    argv = [exe, "-p", prompt, "--approval-mode", mode, "--output-format", "stream-json",
            "-m", "gemini-2.5-pro"]
    return argv, env


def copilot_setup(exe, version, scenario, prompt, home, work, port):
    env = base_env(home)
    env.update({
        # BYOK: its own model provider, no GitHub sign-in, no network.
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_WIRE_API": "completions",
        "COPILOT_PROVIDER_API_KEY": "fake",
        "COPILOT_MODEL": "gpt-4.1",
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_HOME": os.path.join(home, ".copilot"),
    })
    argv = [exe, "-p", prompt]
    # playdeck's translation (src/agents/argv.rs) for the tools listed.
    if scenario == "tool-readonly":
        argv += ["--deny-tool", "write"]
    elif scenario == "always-tool":
        argv += ["--allow-all-tools", "--allow-all-paths"]
    else:
        argv += ["--allow-tool", "shell", "--allow-tool", "write"]
    argv += ["--output-format", "json"]
    return argv, env


SETUPS = {"claude": claude_setup, "codex": codex_setup, "opencode": opencode_setup,
          "gemini": gemini_setup, "copilot": copilot_setup}
BIN = {"copilot": "copilot", "claude": "claude", "codex": "codex", "opencode": "opencode", "gemini": "gemini"}


# ------------------------------------------------------------ server


def start_server(tmp):
    port_file = os.path.join(tmp, "port")
    log = os.path.join(tmp, "server.log")
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "model_server.py"), "--port", "0",
                          "--port-file", port_file, "--log", log,
                          "--stall-seconds", str(STALL_SECONDS)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(port_file):
            return p, int(open(port_file).read().strip())
        time.sleep(0.05)
    p.kill()
    raise SystemExit("model server did not start")


def server_call(port, method, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read() or b"null")


# ------------------------------------------------------------ runs


def installed():
    out = []
    for d in sorted(glob.glob(os.path.join(INSTALL, "*-*"))):
        name = os.path.basename(d)
        cli, _, ver = name.partition("-")
        exe = os.path.join(d, "node_modules", ".bin", BIN.get(cli, cli))
        if cli in SETUPS and os.path.exists(exe) and os.path.exists(os.path.join(d, ".installed")):
            out.append((cli, ver, exe))
    return out


def run_one(cli, ver, exe, scenario, port, timeout):
    tmp = tempfile.mkdtemp(prefix=f"realcli-{cli}-")
    home, work = os.path.join(tmp, "home"), os.path.join(tmp, "work")
    os.makedirs(os.path.join(home, "tmp"))
    os.makedirs(work)
    subprocess.run(["git", "init", "-q", work], check=True)
    prompt = f"PLAYDECK_SCENARIO={server_scenario(scenario)} " + INSTRUCTIONS.get(
        scenario, "Answer the question: what is six times seven?")
    argv, env = SETUPS[cli](exe, ver, scenario, prompt, home, work, port)
    server_call(port, "POST", "/_reset")
    log_before = len(server_call(port, "GET", "/_log"))
    if scenario == "always-tool" and cli != "claude":
        # Only claude has a turn limit; the others loop until killed.
        timeout = min(timeout, ALWAYS_TOOL_SECONDS[cli])
    if cli == "opencode" and scenario in ("rate-limit", "server-error", "overloaded"):
        # opencode retries these without end (README.md).
        timeout = min(timeout, OPENCODE_RETRY_SECONDS)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
    secs = round(time.monotonic() - t0, 2)
    # Leftover children of the CLI (its own process group) go too.
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    hello = os.path.join(work, "hello.txt")
    reqs = server_call(port, "GET", "/_log")[log_before:]

    def ph(s):
        return (s.replace(work, "<WORK>").replace(home, "<HOME>").replace(tmp, "<TMP>")
                .replace(os.path.dirname(os.path.dirname(os.path.dirname(exe))), "<CLI_DIR>")
                .replace(f"127.0.0.1:{port}", "127.0.0.1:<PORT>"))

    env_shown = {k: ph(v) for k, v in env.items() if k not in ("PATH",)}
    meta = {
        "cli": cli, "version": ver, "scenario": scenario,
        "argv": [ph(a) for a in argv], "env": env_shown, "cwd": "<WORK>",
        "exit_code": p.returncode, "timed_out": timed_out, "timeout_seconds": timeout,
        "seconds": secs,
        "hello_txt_created": os.path.exists(hello),
        "hello_txt_content": open(hello, errors="replace").read() if os.path.exists(hello) else None,
        "stdout_lines": out.count(b"\n"),
        "stderr": ph(err.decode("utf-8", "replace"))[-6000:],
        "server_requests": [{k: r[k] for k in ("method", "path", "format", "scenario", "status", "note", "tools") if k in r} for r in reqs],
        "paths_in_capture": "verbatim (temp paths of the run appear as they were)",
        "temp_dir": tmp,
    }
    dest = os.path.join(CAPTURES, cli, ver)
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, f"{scenario}.jsonl"), "wb") as f:
        f.write(out)
    with open(os.path.join(dest, f"{scenario}.meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    shutil.rmtree(tmp, ignore_errors=True)
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", action="append")
    ap.add_argument("--version", action="append")
    ap.add_argument("--scenario", action="append")
    ap.add_argument("--timeout", type=float, default=90)
    a = ap.parse_args()
    todo = [x for x in installed() if (not a.cli or x[0] in a.cli) and (not a.version or x[1] in a.version)]
    if not todo:
        print("skipped: no CLI installed (run tests/realcli/install.sh)")
        return 0
    tmp = tempfile.mkdtemp(prefix="realcli-server-")
    srv, port = start_server(tmp)
    try:
        for cli, ver, exe in todo:
            for s in a.scenario or SCENARIOS:
                if s == "tool-partial" and cli != "claude":
                    continue
                m = run_one(cli, ver, exe, s, port, a.timeout)
                print(f"{cli:8} {ver:9} {s:14} exit={m['exit_code']!s:4} {m['seconds']:6.1f}s "
                      f"hello={'y' if m['hello_txt_created'] else 'n'} lines={m['stdout_lines']}"
                      f"{' TIMEOUT' if m['timed_out'] else ''}", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
