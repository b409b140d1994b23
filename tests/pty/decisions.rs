//! Issue 55 in a terminal: what the operator decides in the console is
//! what they saw — a gate with a failed dependency is asked by name, a
//! mark belongs to the lane it was made in, a review sent back from the
//! diff view carries its notes, a refusal or a send-back is the operator's
//! choice, and an approval made on a review that came back meanwhile is
//! refused and asked again.

use crate::common;

use std::path::Path;
use std::time::Duration;

use crate::console_pty::ctl;
use common::git;
use common::pty::{Console, Screen};

const GATES: &str = r#"[play]
name = "deps"
[palette]
roles = [{ role = "implementer" }, { role = "reviewer" }]
[[operations]]
id = "svc-build"
role = "implementer"
instruction = "build"
sim = { duration_ms = 100 }
[[operations]]
id = "svc12-integration"
role = "implementer"
instruction = "integrate"
sim = { duration_ms = 100, outcome = "fail", error = "checkout times out" }
[[operations]]
id = "ship"
role = "reviewer"
instruction = "ship"
approval = true
depends_on = ["svc-build", "svc12-integration"]
when = "always"
sim = { duration_ms = 10 }
[[operations]]
id = "docs"
role = "reviewer"
instruction = "docs"
approval = true
depends_on = ["svc-build"]
sim = { duration_ms = 10 }
[[operations]]
id = "qa"
role = "reviewer"
instruction = "qa"
approval = true
depends_on = ["svc-build"]
sim = { duration_ms = 10 }
"#;

/// `a` on a gate flagged ✗ asks by name with the ✗ line (before: one key
/// approved it at once). Gates marked for approval that another terminal
/// denies lose their marks, and `R` never retries them (before: `R`
/// silently undid the colleague's denial).
#[test]
fn a_failed_dependency_is_asked_about_and_a_colleagues_denial_stands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("p.toml"), GATES).unwrap();
    let mut console = Console::open(d, &["run", "p.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for("three gates, one flagged", |s| {
        s.contains("✗ship") && s.contains("approval 3")
    });
    console.press(b"/ship\r");
    console.press(b"ll");
    screen.wait_for("ship named in the footer", |s| {
        s.contains("ship: a approve")
    });
    console.press(b"a");
    screen.wait_for("asked by name, with what failed", |s| {
        s.contains("Approve ship?") && s.contains("1 of 2 dependencies failed: svc12-integration")
    });
    console.press(b"n");
    screen.wait_for("not approved", |s| {
        !s.contains("Approve ship?") && s.contains("approval 3")
    });
    console.press(b"\x1b");
    screen.wait_for("the filter cleared", |s| {
        s.contains("filter cleared") || !s.contains("/ship")
    });
    console.press(b"*");
    screen.wait_for("every gate marked", |s| {
        s.contains("3 marked: a approves them")
    });
    ctl(d, &["deny", "docs", "not", "this", "week"]);
    screen.wait_for("the colleague's denial", |s| {
        s.contains("deny docs") && s.contains("approval 2")
    });
    // R retries marked failures only: docs was marked for approval.
    console.press(b"R");
    screen.wait_for("R does not act on the gates' marks", |s| {
        s.contains("has not failed")
    });
    let events = ctl(d, &["events"]);
    assert!(
        !events
            .lines()
            .any(|l| l.contains("\"type\":\"retried\"") && l.contains("\"name\":\"docs\"")),
        "docs was retried: {events}"
    );
    // What is left marked is approved together, asked once.
    console.press(b"a");
    screen.wait_for("the marked gates still waiting", |s| {
        s.contains("Approve these 2 operations?") && !s.contains("⚑ docs")
    });
    console.press(b"y");
    screen.wait_for("the end", |s| s.contains("finished"));
    console.press(b"q");
    console.wait_exit();
}

/// Two operations whose work waits for review, in a repository. Each
/// agent names its conversation and keeps in `<op>-note.txt` what the
/// operator said (a fresh attempt is told in its prompt).
fn reviewed(d: &Path) {
    let op = |id: &str| {
        format!(
            "[[operations]]\nid = \"{id}\"\nrole = \"implementer\"\nagent = \"writer\"\nindependent_root = true\nreview = true\ninstruction = '''\necho '{{\"type\":\"session\",\"id\":\"s-{id}\"}}'\necho 'the {id}' > {id}.txt\necho '{{\"type\":\"result\",\"result\":{{\"ok\":true}}}}'\nsed -n '/^The operator says: /,$p' > {id}-note.txt <<'REST'\n'''\n"
        )
    };
    let play = format!(
        "[play]\nname = \"reviews\"\n[palette]\nroles = [{{ role = \"implementer\", agent = \"writer\" }}]\n[agents.writer]\nbinary = \"sh\"\nstream_format = \"jsonl\"\nprompt_via = \"stdin\"\n[workspace]\nisolation = \"worktree\"\n\n{}\n{}",
        op("api"),
        op("web")
    );
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("p.toml"), play).unwrap();
    std::fs::write(d.join(".gitignore"), "config/\n").unwrap();
    git(d, &["add", "p.toml", ".gitignore"]);
    git(d, &["commit", "-q", "-m", "the play"]);
}

/// What waits for review now, by operation: its basis (`ctl status`).
fn review_basis(d: &Path, op: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(&ctl(d, &["status", "--json"])).unwrap();
    v["decisions"]
        .as_array()?
        .iter()
        .find(|w| w["op"] == op)
        .and_then(|w| w["on"].as_str().map(str::to_string))
}

/// The file `name` on the run's branch, or what git said.
fn on_branch(d: &Path, name: &str) -> String {
    let branch = git(
        d,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/playdeck/*",
        ],
    );
    let branch = branch.lines().find(|b| !b.contains("-ops/")).unwrap_or("");
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(d)
        .args(["show", &format!("{branch}:{name}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// From the diff view a line note goes back with `T` as one message in
/// the agent's conversation; `d` on a review offers reject or send back
/// (ctrl-t sends the reason to the agent now); an approval from a diff
/// view whose review came back meanwhile is refused and asked again, and
/// what lands is what the second question showed.
#[test]
fn the_review_loop_in_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    reviewed(d);
    let mut console = Console::open(d, &["run", "p.toml"]);
    let screen = Screen {
        parser: console.screen.parser.clone(),
    };
    screen.wait_for_within("both reviews", Duration::from_secs(120), |s| {
        s.contains("◧api") && s.contains("◧web")
    });
    // api: its diff, a note on its line, sent back with it.
    console.press(b"/api\r");
    console.press(b"ll");
    screen.wait_for("api named", |s| s.contains("api: a land"));
    console.press(b"D");
    screen.wait_for("api's diff", |s| {
        s.contains("what its review is of") && s.contains("+the api")
    });
    console.press(b"]");
    screen.wait_for("on its hunk", |s| s.contains("hunk 1/1"));
    console.press(b"j");
    console.press(b"c");
    console.press(b"why a file of its own\r");
    screen.wait_for("the note", |s| s.contains("1 note(s) on the diff"));
    console.press(b"T");
    screen.wait_for("the send-back with the note", |s| {
        s.contains("Send api back") && s.contains("api.txt:1 (+the api): why a file of its own")
    });
    console.press(b"\r");
    let note = d.join(".playdeck/runs");
    common::wait_for("api told the note", Duration::from_secs(60), || {
        let run = std::fs::read_dir(&note)
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .next()
            .ok_or("no run")?
            .path();
        let text = std::fs::read_to_string(run.join("work/api/api-note.txt"))
            .map_err(|e| e.to_string())?;
        if text.contains("why a file of its own") {
            Ok(())
        } else {
            Err(text)
        }
    });
    // Its second review: the diff view opened on it, then a colleague
    // sends it back again meanwhile.
    let second = common::wait_for("api's second review", Duration::from_secs(60), || {
        review_basis(d, "api")
            .filter(|b| b.contains('@'))
            .ok_or_else(|| "none".into())
    });
    screen.wait_for("api waiting again", |s| s.contains("◧api"));
    console.press(b"D");
    screen.wait_for("the second diff", |s| s.contains("what its review is of"));
    ctl(d, &["say", "api", "keep", "the", "header"]);
    common::wait_for(
        "api's third review",
        Duration::from_secs(60),
        || match review_basis(d, "api") {
            Some(b) if b != second => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    // Approved from the diff view of the second: refused, asked again.
    console.press(b"a");
    screen.wait_for("the stale approval asked again", |s| {
        s.contains("came back for review with other commits") && s.contains("Approve api?")
    });
    console.press(b"y");
    screen.wait_for_within("api landed", Duration::from_secs(60), |s| {
        s.contains("succeeded 1")
    });
    assert!(on_branch(d, "api-note.txt").contains("keep the header"));
    // web: deny offers the choice; ctrl-t sends the reason back instead.
    console.press(b"\x1b");
    screen.wait_for("the filter cleared", |s| !s.contains("/api"));
    console.press(b"/web\r");
    screen.wait_for("web named", |s| s.contains("web: a land"));
    let first = review_basis(d, "web").expect("web waits for review");
    console.press(b"d");
    screen.wait_for("reject or send back", |s| {
        s.contains("Reject web's work?") && s.contains("send it back instead")
    });
    console.press(b"use tabs");
    console.press(b"\x14");
    common::wait_for(
        "web's next review",
        Duration::from_secs(60),
        || match review_basis(d, "web") {
            Some(b) if b != first => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    screen.wait_for("web waiting again", |s| s.contains("◧web"));
    // Approved as soon as the console shows it: if the console had not
    // seen the new review yet, the run refuses and the console asks again.
    console.press(b"a");
    let s = screen.wait_for_within("web landed, or asked again", Duration::from_secs(60), |s| {
        s.contains("succeeded 2") || s.contains("Approve web?")
    });
    if s.contains("Approve web?") {
        console.press(b"y");
        screen.wait_for_within("both landed", Duration::from_secs(60), |s| {
            s.contains("succeeded 2")
        });
    }
    assert!(on_branch(d, "web-note.txt").contains("use tabs"));
    console.press(b"q");
    screen.wait_for("the quit question", |s| {
        s.contains("quit") || s.contains("Detach")
    });
    console.press(b"q");
    console.wait_exit();
}
