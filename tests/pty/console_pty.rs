//! The console as a person uses it: the binary in a pseudo-terminal, keys
//! typed, the screen read back through a terminal emulator after each.

use crate::common;

use std::time::Duration;

use common::git;
use common::pty::{Console, Screen, whole_updates};

const PLAY: &str = include_str!("../plays/pty_console.toml");

#[test]
fn a_frame_is_shown_only_once_written_whole() {
    let frame = b"\x1b[?2026hab\x1b[?2026l";
    assert_eq!(whole_updates(frame), frame.len());
    assert_eq!(whole_updates(b"x\x1b[?2026hab"), 1);
    assert_eq!(whole_updates(b"\x1b[?2026hab\x1b[?2026lc\x1b[?20"), 19);
    assert_eq!(whole_updates(b"plain text"), 10);
}

#[test]
fn an_operator_session_in_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pty.toml"), PLAY).unwrap();
    let mut console = Console::open(dir.path(), &["run", "pty.toml"]);
    let parser = console.screen.parser.clone();
    let screen = Screen {
        parser: parser.clone(),
    };
    let mut press = |keys: &[u8]| console.press(keys);

    // The lanes appear and the plan runs (4 s: time for p to land before
    // it ends, on a loaded machine too).
    screen.wait_for("the lanes, with plan running", |s| {
        s.contains("queued 3  running 1") && s.contains("Spawn ledger")
    });
    assert!(screen.parser.lock().unwrap().screen().alternate_screen());

    press(b"p");
    screen.wait_for("the pause", |s| {
        s.contains("● paused") || s.contains("● draining")
    });
    screen.wait_for("plan to finish while paused", |s| {
        s.contains("● paused") && s.contains("paused 2")
    });

    // The paused lane holds build and check: select check and step it.
    press(b"lllj");
    press(b"s");
    // build stays paused; check runs (6 s: r comes before it ends, or the
    // round would end and release its instance) or is done.
    screen.wait_for("a step of the selected operation", |s| {
        s.contains("step: check started")
            && s.contains("paused 1")
            && (s.contains("running 1") || s.contains("succeeded 2"))
    });

    press(b"r");
    // The status line says "resumed" until the next message replaces it
    // (on a loaded machine, before this looks): the emptied lane says it too.
    screen.wait_for("the resume", |s| {
        s.contains("● running") && (s.contains("resumed") || s.contains("paused 0"))
    });

    press(b"i");
    screen.wait_for("the palette inspector", |s| {
        s.contains("Palette inspector") && s.contains("Initial roles (3)")
    });
    press(b"\x1b");
    screen.wait_for("the inspector to close", |s| {
        !s.contains("Palette inspector")
    });

    // check finished on the checker instance (current_round, due: idle
    // now), build (20 s from the resume: time for the steps above on a
    // loaded machine) still holds the coder instance.
    screen.wait_for("check to finish", |s| {
        s.contains("checker-1 idle") && s.contains("coder-1 busy")
    });
    press(b"x");
    // The whole question, not a frame caught half drawn.
    let c = screen.wait_for("the release confirmation", |s| {
        s.contains("Release idle capacity") && s.contains("Retained (1):")
    });
    assert!(
        c.contains("Released (1):") && c.contains("checker-1"),
        "{c}"
    );
    assert!(
        c.contains("Retained (1):") && c.contains("coder-1 — busy"),
        "{c}"
    );
    press(b"y");
    screen.wait_for("the release", |s| s.contains("released 1, retained 1"));

    press(b"q");
    // How many run when q is pressed depends on the machine's pace.
    screen.wait_for("the whole quit question", |s| {
        s.contains("Detach from the run?")
            && s.contains("detach (the run goes on)")
            && s.contains("cancel the run: stops ")
            && s.contains(" running")
    });
    press(b"c");
    // Cancelled: exit 1. The terminal is given back (the main screen, the
    // cursor shown), and one line says how the run ended and how to take
    // it up again.
    assert_eq!(console.wait_exit(), 1);
    let after = screen.wait_restored("playdeck: run ");
    assert!(
        after.contains("cancelled (quit from the console); resume it: playdeck resume "),
        "{after}"
    );
    // The run ended cleanly: its result says cancelled, its socket is gone
    // (the run host's last acts, maybe just after the console has left).
    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".playdeck/runs"))
        .unwrap()
        .collect();
    let run = runs[0].as_ref().unwrap().path();
    common::wait_for(
        "the run host to end cleanly",
        Duration::from_secs(60),
        || {
            let written = run.join("result.json").exists();
            let socket = run.join("ctl/control.sock").exists();
            if written && !socket {
                return Ok(());
            }
            Err(format!(
                "result.json {}, the socket {}",
                if written { "written" } else { "missing" },
                if socket { "still there" } else { "gone" },
            ))
        },
    );
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["outcome"], "cancelled");
}

/// Real agent CLIs in the console: the running lane shows what the agent
/// does, the node inspector its output; quitting kills its processes.
#[test]
fn real_agents_in_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let agent = common::AGENT;
    // A marker no other process has in its command line.
    let marker = format!("pty-marker-{}", std::process::id());
    let play = format!(
        "[play]\nname = \"agents\"\n[palette]\nroles = [{{ role = \"implementer\" }}]\n\
         [agents.cli]\nbinary = \"{agent}\"\nstream_format = \"claude\"\nflags.stream = [\"--format\", \"claude\"]\n\
         [[operations]]\nid = \"long\"\nrole = \"implementer\"\nagent = \"cli\"\nflag_profile = \"stream\"\n\
         instruction = \"{marker}\\n@fork 120\\n@stderr compiling\\n@sleep 240\"\n"
    );
    std::fs::write(dir.path().join("agents.toml"), play).unwrap();
    let mut console = Console::open(dir.path(), &["run", "agents.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the agent's state in the running lane", |s| {
        s.contains("running 1") && s.contains("long thinking…")
    });
    assert!(processes_with(&marker) >= 1, "the agent runs");
    // Focus the running column and inspect the operation.
    console.press(b"l");
    console.press(b"\r");
    // How it was placed comes with the welcome: the attached console does
    // not read the play's operations.
    screen.wait_for("the whole node inspector with output", |s| {
        s.contains("agent")
            && s.contains("output")
            && s.contains("compiling")
            && s.contains("long.1.stdout.log")
            && s.contains("root (the first operation)")
    });
    console.press(b"\x1b");
    // Apart, or ESC q reads as alt-q.
    screen.wait_for("the inspector to close", |s| !s.contains("compiling"));
    console.press(b"q");
    screen.wait_for("the quit question", |s| s.contains("Detach from the run?"));
    console.press(b"c");
    assert_eq!(console.wait_exit(), 1);
    common::wait_for(
        "the agent processes to end with quit",
        Duration::from_secs(5),
        || match processes_with(&marker) {
            0 => Ok(()),
            n => Err(format!("{n} outlived it")),
        },
    );
}

/// Live (not zombie) processes whose command line contains `needle`.
fn processes_with(needle: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(needle)
        })
        .count()
}

/// Runs tests/plays/crash.toml headless into `<dir>/rec`, killed after
/// `kill_after` events when given.
fn record(dir: &std::path::Path, kill_after: Option<u32>) -> std::process::Output {
    let play = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plays/crash.toml");
    let mut c = common::playdeck();
    c.arg("run")
        .arg(&play)
        .args([
            "--headless",
            "--approve",
            "all",
            "--speed",
            "8",
            "--run-dir",
        ])
        .arg(dir.join("rec"));
    if let Some(n) = kill_after {
        c.env("PLAYDECK_FAULT_KILL_AFTER", n.to_string());
    }
    c.output().unwrap()
}

/// `playdeck replay`: a recorded run, read-only, with its timeline.
#[test]
fn a_replay_in_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), None);
    assert_eq!(out.status.code(), Some(1));
    let mut console = Console::open(dir.path(), &["replay", "rec", "--speed", "0.25"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the replay and its timeline", |s| {
        s.contains("playdeck replay") && s.contains("event ") && s.contains("×0.25")
    });
    console.press(b" ");
    console.press(b":");
    screen.wait_for("the jump prompt", |s| s.contains("jump to"));
    console.press(b"#12\r");
    screen.wait_for("event 12", |s| s.contains("event 12 /"));
    console.press(b"G");
    screen.wait_for("the end", |s| s.contains("finished: failed"));
    console.press(b"p");
    screen.wait_for("a refusal", |s| s.contains("disabled in a replay"));
    console.press(b"q");
    assert_eq!(console.wait_exit(), 0);
    screen.wait_screen("the terminal restored", Duration::from_secs(60), |s| {
        !s.alternate_screen()
    });
}

/// `playdeck resume` opens the console on a crashed run with its history,
/// finishes it, and `e` writes the report.
#[test]
fn resuming_a_crashed_run_in_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), Some(40));
    assert!(out.status.code().is_none(), "killed");
    let mut console = Console::open(
        dir.path(),
        &["resume", "rec", "--approve", "all", "--speed", "8"],
    );
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    // What happened before the crash is there, and the run finishes.
    screen.wait_for("the resumed run to finish", |s| {
        s.contains("finished: failed") && s.contains("succeeded 8")
    });
    console.press(b"e");
    screen.wait_for("the report", |s| s.contains("report written to"));
    assert!(dir.path().join("rec/report.md").is_file());
    console.press(b"q");
    assert_eq!(console.wait_exit(), 1);
    let log = playdeck::store::whole_text(&dir.path().join("rec/events.jsonl")).unwrap();
    assert!(log.contains("\"type\":\"resumed\""));
    // The exit line says it was resumed, and what to retry.
    let after = screen.wait_for("the exit line", |s| s.contains("playdeck: resumed run"));
    assert!(
        after.contains(" failed — ") && after.contains("retry: playdeck resume "),
        "{after}"
    );
}

/// A config with three errors says all three, one a line, before the
/// terminal is taken and before anything is written: no run host, no run
/// directory, no log (issue #25: an operator fixes them in one pass).
#[test]
fn a_config_with_three_errors_says_all_three_and_takes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pty.toml"), PLAY).unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let config = dir.path().join("config/config.toml");
    std::fs::write(
        &config,
        "theme = \"sparkly\"\n[keys]\nexplode = \"e\"\npause = \"hyper-p\"\n",
    )
    .unwrap();
    // A play file's run and the demo (both hosted).
    for args in [&["run", "pty.toml"][..], &[]] {
        let mut console = Console::open(dir.path(), args);
        let code = console.wait_exit();
        let said = common::wait_for("the errors said", Duration::from_secs(10), || {
            let raw = String::from_utf8_lossy(&console.raw.lock().unwrap()).into_owned();
            match raw.contains("no theme") {
                true => Ok(raw),
                false => Err(format!("{args:?}: {raw}")),
            }
        });
        let file = config.display().to_string();
        assert!(
            said.contains(&format!("{file}: 3 errors:")),
            "{args:?}: {said}"
        );
        for error in [
            format!("{file}:3:1: [keys] names unknown action \"explode\""),
            format!("{file}:4:9: [keys] pause: \"hyper-p\" is not a key"),
            format!("{file}:1:9: no theme \"sparkly\"; themes: default"),
        ] {
            assert!(said.contains(&error), "{args:?}: {error:?} in {said}");
        }
        assert_eq!(code, 2, "{args:?}: {said}");
        assert!(
            !console.wrote(b"\x1b[?1049h"),
            "{args:?}: the terminal was taken: {said}"
        );
        assert!(
            !dir.path().join(".playdeck").exists(),
            "{args:?}: something was written: {said}"
        );
    }
}

/// Shrunk below 80×24, the console shows only its notice: keys that would
/// act on the hidden screen do nothing, and quit quits without asking.
#[test]
fn a_terminal_too_small_takes_only_quit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pty.toml"), PLAY).unwrap();
    let mut console = Console::open(dir.path(), &["run", "pty.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the lanes", |s| s.contains("Spawn ledger"));
    console.resize(60, 20);
    screen.wait_for("the notice", |s| s.contains("too small for playdeck"));
    // Pause, release, deny, help: nothing opens, nothing pauses. All of
    // them are handled before the terminal grows again.
    console.press_handled(b"pxd?");
    console.resize(120, 36);
    let c = screen.wait_for("the console again", |s| s.contains("Spawn ledger"));
    assert!(
        !c.contains("Release idle capacity") && !c.contains("Keys ·"),
        "{c}"
    );
    assert!(c.contains("● running"), "p did nothing while hidden: {c}");
    // Help, the last, was refused in words the message log keeps (the
    // status line may have said something since): it was taken while
    // the terminal was too small, and so were the keys before it.
    console.press(b"M");
    screen.wait_for("the message log with help refused", |s| {
        s.contains("Messages (") && s.contains("the terminal is too small")
    });
    console.press(b"\x1b");
    screen.wait_for("the log to close", |s| !s.contains("Messages ("));
    console.resize(60, 20);
    screen.wait_for("the notice", |s| s.contains("too small for playdeck"));
    // Too small to ask: q detaches at once, and the run goes on.
    console.press(b"q");
    assert_eq!(console.wait_exit(), 0, "detached");
    let after = screen.wait_for("the exit line", |s| s.contains("playdeck: detached"));
    assert!(
        after.contains("goes on — attach: playdeck attach "),
        "{after}"
    );
    assert!(ctl(dir.path(), &["status"]).contains("running"));
    ctl(dir.path(), &["cancel"]);
}

/// `playdeck ARGS` in `dir`, which must succeed; its stdout.
pub(crate) fn ctl(dir: &std::path::Path, args: &[&str]) -> String {
    let out = common::playdeck()
        .arg("ctl")
        .arg("latest")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Issue 21: SIGTERM or SIGHUP to the console (a closed pane, a dropped
/// ssh session) detaches it: the terminal is restored, the exit line says
/// the run goes on, and it does, to its end.
#[test]
fn sigterm_to_the_console_detaches_and_the_run_finishes() {
    stopped_by("TERM");
}

#[test]
fn sighup_to_the_console_detaches_and_the_run_finishes() {
    stopped_by("HUP");
}

/// Two operations of 3 s: the run still goes when the signal comes, on a
/// loaded machine too.
const SHORT: &str = include_str!("../plays/two_short_steps.toml");

fn stopped_by(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("short.toml"), SHORT).unwrap();
    let mut console = Console::open(dir.path(), &["run", "short.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the lanes", |s| s.contains("running 1"));
    let pid = console.child.process_id().unwrap();
    let killed = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(console.wait_exit(), 0);
    let after = screen.wait_for("the exit line", |s| s.contains("playdeck: detached"));
    assert!(
        after.contains(&format!("detached (SIG{name} to the console); run ")),
        "{after}"
    );
    assert!(!screen.parser.lock().unwrap().screen().alternate_screen());
    let result = wait_for_result(dir.path());
    assert_eq!(result["outcome"], "succeeded", "{result:#}");
}

/// The result of the one run under `dir`, once it is written.
fn wait_for_result(dir: &std::path::Path) -> serde_json::Value {
    let text = common::wait_for("the run to finish", Duration::from_secs(60), || {
        std::fs::read_dir(dir.join(".playdeck/runs"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path().join("result.json")).ok())
            .ok_or_else(|| "no result.json".to_string())
    });
    serde_json::from_str(&text).unwrap()
}

/// `playdeck replay` of a run that is still going follows it: events
/// written after the replay opened appear.
#[test]
fn a_replay_of_a_live_run_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pty.toml"), PLAY).unwrap();
    let mut live = common::playdeck()
        .args(["run", "pty.toml", "--headless", "--run-dir", "live"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.path().join("live/ctl/control.sock");
    common::wait_for(
        "the live run to listen",
        Duration::from_secs(60),
        || match sock.exists() {
            true => Ok(()),
            false => Err(format!("no {}", sock.display())),
        },
    );
    let mut console = Console::open(dir.path(), &["replay", "live"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the replay following", |s| {
        s.contains("playdeck replay") && s.contains("following the live run")
    });
    // At the end of what was recorded, the replay goes on with the run:
    // plan and check are done only ~10 s in.
    console.press(b"G");
    screen.wait_for("events written after it opened", |s| {
        s.contains("succeeded 2") && s.contains("following the live run")
    });
    console.press(b"q");
    assert_eq!(console.wait_exit(), 0);
    let _ = live.kill();
    let _ = live.wait();
}

/// A run cancelled from outside (`playdeck ctl RUN cancel`) while the
/// console watches: the console shows it finished, and its exit line says
/// where the cancel came from.
#[test]
fn a_cancel_from_playdeck_ctl_is_named_in_the_exit_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pty.toml"), PLAY).unwrap();
    let mut console = Console::open(dir.path(), &["run", "pty.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the lanes", |s| s.contains("running 1"));
    let ctl = common::playdeck()
        .args(["ctl", "latest", "cancel"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(ctl.status.success(), "{ctl:?}");
    screen.wait_for("the cancelled run", |s| s.contains("finished: cancelled"));
    // Finished: q leaves without a question.
    console.press(b"q");
    assert_eq!(console.wait_exit(), 1);
    let after = screen.wait_for("the exit line", |s| s.contains("playdeck: run "));
    assert!(
        after.contains("cancelled (through playdeck ctl); resume it: playdeck resume "),
        "{after}"
    );
    // Named by its id (it resolves anywhere), and where it is.
    let flat: String = after.split('\n').map(str::trim_end).collect();
    assert!(
        flat.contains(" · it is in /") && flat.contains(".playdeck/runs/"),
        "{after}"
    );
}

/// A failed run names its cause the same way in the console's header,
/// `playdeck ctl RUN status` (text and JSON) and the exit line.
#[test]
fn a_failure_names_its_cause_in_the_console_ctl_status_and_the_exit_line() {
    const FAILS: &str = include_str!("../plays/check_fails_ship_skipped.toml");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fails.toml"), FAILS).unwrap();
    let mut console = Console::open(dir.path(), &["run", "fails.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the failed run", |s| {
        s.contains("finished: failed — 1 failed: check")
    });
    let ctl = |json: bool| {
        let mut args = vec!["ctl", "latest", "status"];
        if json {
            args.push("--json");
        }
        let out = common::playdeck()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let text = ctl(false);
    assert!(
        text.contains("\"fails\": finished: failed — 1 failed: check — round"),
        "{text}"
    );
    assert!(text.contains("failed 1 · skipped 1"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&ctl(true)).unwrap();
    assert_eq!(v["cause"], "1 failed: check", "{v:#}");
    console.press(b"q");
    assert_eq!(console.wait_exit(), 1);
    let after = screen.wait_for("the exit line", |s| s.contains("playdeck: run "));
    assert!(
        after.contains("failed — 1 failed: check; retry: playdeck resume "),
        "{after}"
    );
}

/// Issue 20: a `playdeck ctl` approval from another terminal does not move
/// the console's cursor onto another gate; when the selected gate itself
/// is approved elsewhere, the next `a` only names the new target.
#[test]
fn a_concurrent_ctl_approval_never_makes_a_approve_another_gate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gates.toml"),
        include_str!("../../examples/plays/gates.toml"),
    )
    .unwrap();
    let mut console = Console::open(dir.path(), &["run", "gates.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    let ctl = |args: &[&str]| {
        let out = common::playdeck()
            .arg("ctl")
            .arg("latest")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    screen.wait_for("three gates", |s| s.contains("approval 3"));
    console.press(b"llj");
    screen.wait_for("gate-b named in the footer", |s| {
        s.contains("gate-b: a approve")
    });
    ctl(&["approve", "gate-a"]);
    // Still on gate-b.
    screen.wait_for("the other terminal's approval", |s| {
        s.contains("approve gate-a")
            && s.contains("approval 2")
            && s.contains("ctl (")
            && s.contains(": approve gate-a")
            && s.contains("gate-b: a approve")
    });
    console.press(b"a");
    screen.wait_for("gate-b approved", |s| s.contains("approved gate-b"));
    // Now gate-c is the only one; approve it elsewhere while selected.
    screen.wait_for("gate-c selected", |s| s.contains("gate-c: a approve"));
    ctl(&["approve", "gate-c"]);
    screen.wait_for("the empty lane", |s| {
        // The header drops a zero count; the lane's title keeps it.
        s.contains("gate-c left awaiting approval") && s.contains("appr 0")
    });
    screen.wait_for("the end", |s| s.contains("finished: succeeded"));
    console.press(b"q");
    assert_eq!(console.wait_exit(), 0);
}

/// `playdeck ARGS` in `dir`; its output.
fn playdeck(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::playdeck()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Issue 21: the run outlives its console. Quitting detaches by default;
/// `playdeck runs` lists the run as needing approval; two consoles attach
/// at once, an approval in one shows in the other with who took it; a
/// read-only console refuses to act; the run ends with every console.
#[test]
fn detach_list_attach_twice_and_approve_from_the_second_console() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gates.toml"),
        include_str!("../../examples/plays/gates.toml"),
    )
    .unwrap();
    let mut first = Console::open(dir.path(), &["run", "gates.toml"]);
    let screen = Screen {
        parser: first.screen.parser.clone(),
    };
    screen.wait_for("three gates", |s| s.contains("approval 3"));
    first.press(b"q");
    screen.wait_for("the detach question", |s| {
        s.contains("Detach from the run?")
    });
    first.press(b"\r");
    assert_eq!(first.wait_exit(), 0);
    let line = screen.wait_for("the exit line", |s| s.contains("playdeck: detached"));
    assert!(
        line.contains("goes on — attach: playdeck attach "),
        "{line}"
    );

    let listed = playdeck(dir.path(), &["runs"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains("gates") && text.contains("needs approval ×3"),
        "{text}"
    );
    let json = playdeck(dir.path(), &["ls", "--json"]);
    let row: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&json.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(row["live"], true, "{row:#}");
    assert_eq!(row["awaiting_approval"].as_array().unwrap().len(), 3);

    let watcher = Console::open(dir.path(), &["attach", "latest"]);
    let watching = Screen {
        parser: watcher.screen.parser.clone(),
    };
    let mut actor = Console::open(dir.path(), &["attach", "latest"]);
    let acting = Screen {
        parser: actor.screen.parser.clone(),
    };
    watching.wait_for("the gates in the watcher", |s| s.contains("approval 3"));
    // The gates are what needs the operator: the bell and a desktop
    // notification (OSC 9, OSC 777) that names them.
    common::wait_for(
        "an OSC 9 notification",
        Duration::from_secs(10),
        || match watcher.wrote(b"\x1b]9;3 operations waiting for approval in run ") {
            true => Ok(()),
            false => Err("none written".into()),
        },
    );
    assert!(watcher.wrote(b"\x1b]777;notify;playdeck;3 operations waiting for approval"));
    assert!(watcher.wrote(b"\x07"));
    acting.wait_for("the gates in the second console", |s| {
        s.contains("approval 3")
    });
    // To the approval lane; its first gate.
    actor.press(b"ll");
    acting.wait_for("gate-a named in the footer", |s| {
        s.contains("gate-a: a approve")
    });
    actor.press(b"a");
    acting.wait_for("its own answer", |s| s.contains("approved gate-a"));
    let seen = watching.wait_for("the approval in the watcher, with who", |s| {
        s.contains("approval 2") && s.contains(": approve gate-a")
    });
    assert!(seen.contains("console ("), "who approved: {seen}");

    let mut read_only = Console::open(dir.path(), &["attach", "latest", "--read-only"]);
    let ro = Screen {
        parser: read_only.screen.parser.clone(),
    };
    ro.wait_for("the gates read-only", |s| s.contains("approval 2"));
    read_only.press(b"ll");
    read_only.press(b"a");
    ro.wait_for("the refusal", |s| s.contains("read-only console"));
    read_only.press(b"q");
    assert_eq!(
        read_only.wait_exit(),
        0,
        "a read-only console leaves at once"
    );

    // The rest from a script; both consoles see the end.
    assert!(
        playdeck(dir.path(), &["ctl", "latest", "approve", "gate-b"])
            .status
            .success()
    );
    assert!(
        playdeck(dir.path(), &["ctl", "latest", "approve", "gate-c"])
            .status
            .success()
    );
    watching.wait_for("the end in the watcher", |s| {
        s.contains("finished: succeeded")
    });
    acting.wait_for("the end in the second console", |s| {
        s.contains("finished: succeeded")
    });
    actor.press(b"q");
    assert_eq!(actor.wait_exit(), 0);
    let after = acting.wait_for("the exit line", |s| s.contains("playdeck: run "));
    assert!(after.contains("succeeded (5 operations)"), "{after}");
    let mut watcher = watcher;
    watcher.press(b"q");
    assert_eq!(watcher.wait_exit(), 0);
    let result = wait_for_result(dir.path());
    assert_eq!(result["outcome"], "succeeded");
    let listed = playdeck(dir.path(), &["runs"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("finished: succeeded"),
        "{listed:?}"
    );
}

/// Issue 21: the runs screen lists every run of the directory (this one
/// as the console sees it) and `enter` on another live run attaches the
/// console to it instead.
#[test]
fn the_runs_screen_switches_the_console_to_another_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gates.toml"),
        include_str!("../../examples/plays/gates.toml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("short.toml"),
        SHORT.replace("3000", "60000"),
    )
    .unwrap();
    // One run detached, waiting at its gates.
    let mut first = Console::open(
        dir.path(),
        &["run", "gates.toml", "--run-dir", ".playdeck/runs/a-gates"],
    );
    let s1 = Screen {
        parser: first.screen.parser.clone(),
    };
    s1.wait_for("three gates", |s| s.contains("approval 3"));
    first.press(b"q");
    s1.wait_for("the detach question", |s| {
        s.contains("Detach from the run?")
    });
    first.press(b"\r");
    assert_eq!(first.wait_exit(), 0);
    // Another in this console.
    let mut second = Console::open(
        dir.path(),
        &["run", "short.toml", "--run-dir", ".playdeck/runs/b-short"],
    );
    let s2 = Screen {
        parser: second.screen.parser.clone(),
    };
    s2.wait_for("the short run", |s| {
        s.contains("short") && s.contains("running 1")
    });
    second.press(b"L");
    let list = s2.wait_for("the runs screen", |s| s.contains("Runs (2)"));
    assert!(
        list.contains("a-gates") && list.contains("needs approval ×3"),
        "{list}"
    );
    assert!(
        list.contains("b-short") && list.contains("running"),
        "{list}"
    );
    // Newest first: b-short (this one, selected), then a-gates. Up stays
    // on the first run (the titles are not a run); down, enter.
    // This run is marked (●) wherever the cursor is.
    second.press(b"k");
    let list = s2.wait_for("the cursor on this run", |s| s.contains("›● b-short"));
    assert!(!list.contains("› a-gates"), "{list}");
    second.press(b"j");
    s2.wait_for("the cursor on the other run", |s| {
        s.contains("›  a-gates") && s.contains(" ● b-short")
    });
    second.press(b"\r");
    s2.wait_for("the gates run in the same console", |s| {
        s.contains("gates") && s.contains("approval 3") && !s.contains("Runs (2)")
    });
    // A finished run opens in its replay (issue 42).
    let done = playdeck(
        dir.path(),
        &[
            "run",
            "short.toml",
            "--headless",
            "--approve",
            "all",
            "--speed",
            "64",
            "--run-dir",
            ".playdeck/runs/c-done",
        ],
    );
    assert!(done.status.success(), "{done:?}");
    second.press(b"L");
    s2.wait_for("three runs", |s| s.contains("Runs (3)"));
    for _ in 0..3 {
        if s2.contents().contains("›  c-done") {
            break;
        }
        second.press(b"k");
        std::thread::sleep(Duration::from_millis(200));
    }
    s2.wait_for("the cursor on the finished run", |s| {
        s.contains("›  c-done")
    });
    second.press(b"\r");
    s2.wait_for("its replay", |s| {
        s.contains("playdeck replay") && s.contains("short")
    });
    second.press(b"q");
    assert_eq!(second.wait_exit(), 0);
    for run in ["a-gates", "b-short"] {
        let out = playdeck(dir.path(), &["ctl", run, "cancel"]);
        assert!(out.status.success(), "{run}: {out:?}");
    }
}

/// An agent on a git worktree of its own (a shell script, its prompt on
/// stdin): it prints on stdout and stderr, changes a committed file and
/// adds one. A gate after it keeps the run going.
const WORKTREE_PLAY: &str = include_str!("../plays/pager_worktree.toml");

/// `O` and `D` hand the terminal to `$PAGER` (here a script that keeps its
/// arguments, the files' content and a line typed into it) and take it
/// back: the pager gets the terminal and its keys, the attempt's output
/// (stderr marked) and the diff of the agent's own worktree; the console
/// comes back drawn whole, answers keys and quits cleanly.
#[test]
fn the_pager_shows_the_output_and_the_worktree_diff_and_the_console_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    std::fs::write(d.join("notes.txt"), "one\n").unwrap();
    std::fs::write(d.join("p.toml"), WORKTREE_PLAY).unwrap();
    // The console's config directory is not part of the repository.
    std::fs::write(d.join(".gitignore"), "config/\n.playdeck/\npager.*\n").unwrap();
    git(d, &["add", "notes.txt", "p.toml", ".gitignore"]);
    git(d, &["commit", "-q", "-m", "the play"]);
    let out = d.join("pager.out");
    let script = d.join("pager.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         { echo \"ARGS: $#\"; [ -t 0 ] && echo 'STDIN IS A TERMINAL'; cat \"$@\"; } >> \"$PAGER_OUT\"\n\
         echo 'the pager waits for a line'\n\
         read -r answer\n\
         echo \"READ: $answer\" >> \"$PAGER_OUT\"\n",
    )
    .unwrap();
    // Run through `sh`, not exec'd: a child forked by another test thread
    // while the script was open for writing would make exec fail with
    // "Text file busy".
    let env = [
        ("PAGER".to_string(), format!("sh {}", script.display())),
        ("PAGER_OUT".to_string(), out.display().to_string()),
    ];
    let mut console = Console::open_with(d, &["run", "p.toml"], &env);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    let alternate = || screen.parser.lock().unwrap().screen().alternate_screen();
    // Its worktree is a real `git worktree add`: room on a loaded machine.
    screen.wait_for_within(
        "the agent's attempt to end and the gate to wait",
        Duration::from_secs(120),
        |s| s.contains("succeeded 1") && s.contains("approval 1"),
    );
    // write is the one succeeded operation: the fifth lane.
    console.press(b"llll");
    console.press(b"O");
    screen.wait_for("the pager on the main screen", |s| {
        s.contains("the pager waits for a line")
    });
    assert!(!alternate(), "the console left the alternate screen");
    // Typed into the pager, not read by the console.
    console.press(b"first\r");
    screen.wait_for("the console back, with what was paged", |s| {
        s.contains("paged write's attempt 1 output")
            && s.contains("succeeded 1")
            && s.contains("ship")
    });
    assert!(alternate(), "the console is back on the alternate screen");
    let paged = std::fs::read_to_string(&out).unwrap();
    assert!(paged.contains("ARGS: 1\nSTDIN IS A TERMINAL\n"), "{paged}");
    assert!(paged.contains("compiling the widget\n"), "{paged}");
    assert!(paged.contains("err│ warning: slow disk\n"), "{paged}");
    assert!(
        paged.contains("READ: first\n"),
        "the pager read its line: {paged}"
    );

    // D: the diff in the console's own view, by file and hunk.
    console.press(b"D");
    let t = screen.wait_for("the diff view", |s| {
        s.contains("Diff · write · file") && s.contains("+two") && s.contains("+brand new")
    });
    assert!(t.contains("-one"), "{t}");
    assert!(t.contains("?? added.txt"), "{t}");
    console.press(b"\x1b");
    screen.wait_for("the lanes again", |s| !s.contains("Diff · write"));
    // The play's own directory was not touched by the agent.
    assert_eq!(
        std::fs::read_to_string(d.join("notes.txt")).unwrap(),
        "one\n"
    );

    // Still responsive: the follow view shows the same output, esc closes.
    console.press(b"F");
    screen.wait_for("the follow view", |s| {
        s.contains("Following write · attempt 1") && s.contains("err│ warning: slow disk")
    });
    console.press(b"\x1b");
    screen.wait_for("the lanes again", |s| !s.contains("Following write"));
    console.press(b"q");
    screen.wait_for("the quit question", |s| s.contains("Detach from the run?"));
    console.press(b"c");
    assert_eq!(console.wait_exit(), 1, "cancelled");
    screen.wait_screen(
        "the terminal to leave the alternate screen",
        Duration::from_secs(60),
        |s| !s.alternate_screen(),
    );
}

/// A key typed while the pager has the terminal but left unread by it
/// (here a pager that only waits) reaches the console once it is back.
/// crossterm's event stream lost it: stopping its reader left a wake
/// queued, and the first read after the pager took the wake and dropped
/// the terminal's readiness with it (issue 46: the pager test's flake).
#[test]
fn a_key_the_pager_left_unread_reaches_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.toml"),
        include_str!("../plays/pager_waits_for_a_line.toml"),
    )
    .unwrap();
    // Through sh (a `;`): it waits and reads nothing.
    let env = [("PAGER".to_string(), "sleep 1; true".to_string())];
    let mut console = Console::open_with(d, &["run", "p.toml"], &env);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the attempt to end and the gate to wait", |s| {
        s.contains("succeeded 1") && s.contains("approval 1")
    });
    // write is the one succeeded operation: the fifth lane.
    console.press(b"llll");
    console.press(b"O");
    screen.wait_screen(
        "the pager to have the terminal",
        Duration::from_secs(60),
        |s| !s.alternate_screen(),
    );
    console.press(b"?");
    screen.wait_for("the help the key asked for, after the pager", |s| {
        s.contains("Keys · the console")
    });
    console.press(b"\x1b");
    screen.wait_for("the help closed", |s| !s.contains("Keys · the console"));
    console.press(b"q");
    screen.wait_for("the quit question", |s| s.contains("Detach from the run?"));
    console.press(b"c");
    assert_eq!(console.wait_exit(), 1, "cancelled");
}

/// A run whose host is stopped (SIGSTOP, ctrl-z) still has its socket
/// accept connections: `attach` waited on a blank screen for ever. It now
/// gives up after the welcome's bound and says the host is stopped and how
/// to let it go on (issue 39).
#[test]
fn attaching_to_a_stopped_host_says_so_and_how_to_wake_it() {
    use rustix::process::{Pid, Signal, kill_process};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut run = common::live_headless_run(d);
    let pid = Pid::from_raw(run.id() as i32).unwrap();
    kill_process(pid, Signal::STOP).unwrap();
    let mut console = Console::open(d, &["attach", ".playdeck/runs/live"]);
    let code = console.wait_exit();
    let said = console.screen.wait_restored("kill -CONT");
    kill_process(pid, Signal::CONT).unwrap();
    let _ = common::playdeck()
        .args(["ctl", ".playdeck/runs/live", "cancel"])
        .current_dir(d)
        .output();
    let _ = run.kill();
    let _ = run.wait();
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains("the run's host did not answer in 10 s")
            && said.contains(&format!(
                "is stopped (SIGSTOP or ctrl-z); `kill -CONT {}`",
                run.id()
            )),
        "{said}"
    );
}

/// An operator's day (issue 25) in a terminal: the problems list, marking
/// gates and approving them with one question, a zoomed lane, and the
/// message log, through the binary.
#[test]
fn triage_and_approvals_at_scale_in_a_terminal() {
    let mut play = String::from(
        r#"
[play]
name = "day"
max_concurrent = 4
[palette]
roles = [{ role = "reviewer" }, { role = "tester" }]
[[operations]]
id = "flaky-suite"
role = "tester"
instruction = "test"
independent_root = true
sim = { duration_ms = 200, outcome = "fail", error = "3 of 40 tests failed: login times out", fail_attempts = 9 }
[[operations]]
id = "soak"
role = "tester"
instruction = "soak"
independent_root = true
sim = { duration_ms = 120000 }
"#,
    );
    for gate in ["sign-api", "sign-web", "sign-db"] {
        play.push_str(&format!(
            "[[operations]]\nid = \"{gate}\"\nrole = \"reviewer\"\ninstruction = \"sign\"\nindependent_root = true\napproval = true\nsim = {{ duration_ms = 100 }}\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("day.toml"), play).unwrap();
    let mut console = Console::open(dir.path(), &["run", "day.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("three gates and a failure", |s| {
        s.contains("⚑ 3 awaiting approval") && s.contains("failed 1")
    });

    // P: every problem on one row, with the failure's first line.
    console.press(b"P");
    // Waited for whole: a frame can be caught half drawn.
    screen.wait_for("the problems list, with the failure's first line", |s| {
        s.contains("Problems (4)")
            && s.contains("3 of 40 tests failed: login times out")
            && s.contains("sign-api")
    });
    console.press(b"\x1b");
    screen.wait_for("the list to close", |s| !s.contains("Problems (4)"));

    // W goes to the oldest gate; m marks it and the next; a asks once.
    console.press(b"W");
    screen.wait_for("the oldest gate", |s| s.contains("has waited"));
    console.press(b"m");
    console.press(b"j");
    console.press(b"m");
    screen.wait_for("two marked", |s| s.contains("2 marked"));
    console.press(b"a");
    screen.wait_for("the question naming both", |s| {
        s.contains("Approve these 2 operations?")
            && s.contains("⚑ sign-api")
            && s.contains("⚑ sign-web")
    });
    console.press(b"y");
    screen.wait_for("one gate left", |s| s.contains("⚑ 1 awaiting approval"));

    // z: the running lane alone, at full width; z again, every lane.
    console.press(b"h");
    console.press(b"z");
    screen.wait_for("the zoomed lane", |s| {
        s.contains("z: every lane") && !s.contains("┌ queued")
    });
    console.press(b"z");
    screen.wait_for("every lane again", |s| !s.contains("z: every lane"));

    // M: what the status line said, kept.
    console.press(b"M");
    screen.wait_for("the message log with what was said", |s| {
        s.contains("Messages (") && s.contains("has waited") && s.contains("2 gates marked")
    });
    console.press(b"\x1b");
    // Apart from the next key: esc then q at once reads as alt-q.
    screen.wait_for("the log to close", |s| !s.contains("Messages ("));

    console.press(b"q");
    screen.wait_for("the quit question", |s| s.contains("Detach from the run?"));
    console.press(b"c");
    assert_eq!(console.wait_exit(), 1);
}

/// The capacity pane through the binary (issue 25): tab to it, select the
/// idle instance, X asks naming it, y releases it.
#[test]
fn an_idle_instance_is_selected_and_released_from_the_capacity_pane() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pty.toml"), PLAY).unwrap();
    let mut console = Console::open(dir.path(), &["run", "pty.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    // check (6 s) is done and its instance idle; build (20 s) still runs.
    screen.wait_for("checker idle", |s| s.contains("checker-1 idle"));
    console.press(b"\t");
    console.press(b"\t");
    console.press(b"\t");
    screen.wait_for("an instance selected", |s| s.contains("coder-1 · coder"));
    // Past checker's title row, to its instance.
    console.press(b"j");
    console.press(b"j");
    screen.wait_for("the idle one selected", |s| {
        s.contains("checker-1 · checker")
    });
    console.press(b"X");
    screen.wait_for("the question naming it", |s| {
        s.contains("Release checker-1 now?") && s.contains("release checker-1")
    });
    console.press(b"y");
    screen.wait_for("the release", |s| {
        s.contains("released") && !s.contains("checker-1 idle")
    });
    console.press(b"q");
    screen.wait_for("the quit question", |s| s.contains("Detach from the run?"));
    console.press(b"c");
    assert_eq!(console.wait_exit(), 1);
}

/// Landing in the console (issue 41): a review waits marked ◧, `D` pages
/// what it would land, `a` lands it; the next operation's work clashes
/// (✕), `S` lends the terminal to a shell in its worktree where the
/// operator resolves it, and `a` lands it.
#[test]
fn a_review_and_a_conflict_resolved_in_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(
        d.join("p.toml"),
        include_str!("../plays/land_review_conflict.toml"),
    )
    .unwrap();
    std::fs::write(d.join(".gitignore"), "config/\n.playdeck/\ntool.*\n").unwrap();
    git(d, &["add", "p.toml", ".gitignore"]);
    git(d, &["commit", "-q", "-m", "the play"]);
    let out = d.join("tool.out");
    let pager = d.join("tool.pager");
    std::fs::write(&pager, "#!/bin/sh\ncat \"$@\" >> \"$TOOL_OUT\"\n").unwrap();
    // The operator's shell: merges the run's branch into the worktree it
    // was opened in, settles the clash, commits, and leaves.
    let shell = d.join("tool.shell");
    std::fs::write(
        &shell,
        "#!/bin/sh\n\
         echo \"SHELL IN $PWD FOR $PLAYDECK_OP\" >> \"$TOOL_OUT\"\n\
         run=$(git for-each-ref --format='%(refname:short)' 'refs/heads/playdeck/*' | grep -v -- -ops/)\n\
         git -c user.name=t -c user.email=t@t merge -q \"$run\" >/dev/null 2>&1\n\
         echo 'the api and the web' > clash.txt\n\
         git add clash.txt && git -c user.name=t -c user.email=t@t commit -q --no-edit\n",
    )
    .unwrap();
    for f in [&pager, &shell] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let env = [
        ("PAGER".to_string(), format!("sh {}", pager.display())),
        ("SHELL".to_string(), shell.display().to_string()),
        ("TOOL_OUT".to_string(), out.display().to_string()),
    ];
    let mut console = Console::open_with(d, &["run", "p.toml"], &env);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for_within("api's review", Duration::from_secs(120), |s| {
        s.contains("◧api")
    });
    // The oldest gate is api's review: D pages what it would land.
    console.press(b"W");
    screen.wait_for("api selected", |s| s.contains("has waited"));
    console.press(b"D");
    screen.wait_for("what api would land, in the diff view", |s| {
        s.contains("Diff · api · file")
            && s.contains("+the api")
            && s.contains("what its review is of")
            && s.contains("# git diff --stat ")
    });
    // From the diff view, `a` lands it at once.
    console.press(b"a");
    screen.wait_for_within("web's conflict", Duration::from_secs(120), |s| {
        s.contains("✕web")
    });
    console.press(b"W");
    screen.wait_for("web selected", |s| s.contains("web: a land (resolved)"));
    console.press(b"S");
    screen.wait_for("the console back from the shell", |s| {
        s.contains("back from the shell in web's worktree")
    });
    let said = std::fs::read_to_string(&out).unwrap();
    assert!(said.contains("/work/web FOR web"), "{said}");
    console.press(b"a");
    screen.wait_for_within("both landed", Duration::from_secs(60), |s| {
        s.contains("succeeded 2")
    });
    console.press(b"q");
    screen.wait_for("the quit question", |s| {
        s.contains("quit") || s.contains("Detach")
    });
    console.press(b"q");
    console.wait_exit();
    let branch = git(
        d,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/playdeck/*",
        ],
    );
    let branch = branch.trim();
    assert_eq!(
        git(d, &["show", &format!("{branch}:clash.txt")]),
        "the api and the web\n"
    );
}

/// Issue 42: the built-in demo is a run like every other: `q` then enter
/// detaches, the run goes on, and the exit line says how to come back.
#[test]
fn the_demo_detaches_like_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut console = Console::open(dir.path(), &["run", "--speed", "2"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("the demo", |s| {
        s.contains("Ship payments 2.4") && s.contains("running")
    });
    console.press(b"q");
    screen.wait_for("the detach question", |s| {
        s.contains("Detach from the run?")
    });
    console.press(b"\r");
    assert_eq!(console.wait_exit(), 0);
    let line = screen.wait_for("the exit line", |s| s.contains("playdeck: detached"));
    assert!(
        line.contains("goes on — attach: playdeck attach "),
        "{line}"
    );
    assert!(ctl(dir.path(), &["status"]).contains("running"));
    ctl(dir.path(), &["cancel"]);
}
