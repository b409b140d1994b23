//! What the operator must get from each real agent CLI in each scenario of
//! the scripted model server — shared by the live runs
//! (`tests/external/realcli.rs`) and the replays of their captures
//! (`tests/cli/realcli_captures.rs`). The
//! exceptions are how each CLI behaves, found by running it
//! (`tests/realcli/README.md`).

use serde_json::Value;

/// The scenarios of `tests/realcli/model_server.py` (`tool-readonly` is
/// `tool` under a read-only ToolSet).
pub const SCENARIOS: [&str; 12] = [
    "answer",
    "tool",
    "tool-readonly",
    "always-tool",
    "spawn",
    "auth",
    "rate-limit",
    "server-error",
    "overloaded",
    "flaky",
    "cut",
    "slow",
];

/// What a scenario must end in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Want {
    /// Success; `usage`: tokens counted once; `tool`: tool activity seen;
    /// `spawn`: one ledger row.
    Succeeds {
        usage: bool,
        tool: bool,
        spawn: bool,
    },
    /// A failure of this cause.
    Fails(&'static str),
    /// The CLI retries inside itself without end: only a limit of
    /// playdeck's (max_runtime) ends it.
    LoopsInside,
}

/// `version` is older than `than` within the same major version.
pub fn older(version: &str, than: &str) -> bool {
    version.split('.').next() == than.split('.').next() && version < than
}

/// What `scenario` on `cli` `version` must give (the live run's `slow`
/// stalls past playdeck's stall timeout; a capture's stall was short).
pub fn want(cli: &str, version: &str, scenario: &str, live: bool) -> Want {
    use Want::*;
    let gemini_011 = cli == "gemini" && version.starts_with("0.11");
    let loops = cli == "opencode" || (cli == "copilot" && scenario == "rate-limit") || gemini_011;
    match scenario {
        "answer" | "flaky" => Succeeds {
            usage: true,
            tool: false,
            spawn: false,
        },
        "slow" if live => Fails("stall_timeout"),
        "slow" => Succeeds {
            usage: true,
            tool: false,
            spawn: false,
        },
        // `tool-partial`: a capture of claude's `tool` with the partial
        // messages playdeck asks for (tests/realcli/capture.py).
        "tool" | "tool-partial" => Succeeds {
            usage: false,
            tool: true,
            spawn: false,
        },
        "tool-readonly" => Succeeds {
            usage: false,
            tool: false,
            spawn: false,
        },
        "spawn" => Succeeds {
            usage: false,
            tool: false,
            spawn: true,
        },
        // claude's --max-turns; gemini stops a repeating loop itself,
        // without an answer. The rest have no turn limit.
        "always-tool" if matches!(cli, "claude" | "gemini") => Fails("turn_limit"),
        "always-tool" => LoopsInside,
        // gemini 0.11 answers nothing and says success: the missing answer
        // is what fails it.
        "auth" if gemini_011 => Fails("stream_error"),
        "auth" => Fails("auth"),
        // gemini 0.11 reports a cut stream as a success with the part it
        // got ("The a"): nothing in its output says otherwise.
        "cut" if gemini_011 => Succeeds {
            usage: false,
            tool: false,
            spawn: false,
        },
        "rate-limit" | "server-error" | "overloaded" | "cut" if loops => LoopsInside,
        "rate-limit" => Fails("rate_limit"),
        // codex says a 500 is "high demand".
        "server-error" if cli == "codex" => Fails("overloaded"),
        "server-error" => Fails("server_error"),
        "overloaded" => Fails("overloaded"),
        // claude 2.0 reports a cut stream as error_during_execution, exit
        // 0, no words of the cause.
        "cut" if cli == "claude" && older(version, "2.1") => Fails("stream_error"),
        "cut" => Fails("server_error"),
        _ => panic!("no scenario {scenario}"),
    }
}

/// The server reports 1200 input tokens (1000 of them cached) and 40
/// output tokens per request; a CLI may make several (side calls for a
/// title, a router, a check), so the totals are the same multiple of each —
/// cached tokens counted once, inside the input. copilot's JSON reports
/// premium requests, not tokens; gemini 0.11's stats have no cached count.
pub fn usage_counted_once(cli: &str, version: &str, usage: Option<&Value>) -> Result<(), String> {
    if cli == "copilot" {
        return Ok(());
    }
    let u = usage.ok_or("no usage")?;
    let (input, cached, output) = (
        u["input_tokens"].as_u64(),
        u["cached_input_tokens"].as_u64(),
        u["output_tokens"].as_u64(),
    );
    let n = input.unwrap_or(0) / 1200;
    let cached_ok = if cli == "gemini" && version.starts_with("0.11") {
        cached.is_none()
    } else {
        cached == Some(n * 1000)
    };
    if n >= 1 && input == Some(n * 1200) && output == Some(n * 40) && cached_ok {
        Ok(())
    } else {
        Err(format!("usage {u}: not n×(1200 in, 1000 cached, 40 out)"))
    }
}
