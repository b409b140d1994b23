//! Landing the work (issue 41), through the binary against real git
//! repositories: each operation in a worktree of its own made from the
//! run's branch, its work landed there once it succeeds, conflicts and
//! reviews waiting for the operator, and `playdeck land` bringing the run's
//! branch into the user's.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use common::git;
use serde_json::Value;

pub(crate) const HEAD: &str = r#"[play]
name = "land"
[palette]
roles = [{ role = "implementer", agent = "sh" }, { role = "tester", agent = "sh" }]
[agents.sh]
binary = "sh"
stream_format = "jsonl"
prompt_via = "stdin"
"#;

/// An operation whose agent runs `script` (a shell script, given as its
/// prompt on stdin) in its worktree, then answers.
pub(crate) fn op(id: &str, deps: &[&str], script: &str, extra: &str) -> String {
    let placement = if deps.is_empty() {
        "independent_root = true".to_string()
    } else {
        format!(
            "depends_on = [{}]",
            deps.iter()
                .map(|d| format!("{d:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "[[operations]]\nid = \"{id}\"\nrole = \"implementer\"\nagent = \"sh\"\n{placement}\n{extra}\ninstruction = '''\n{script}\necho '{{\"type\":\"result\",\"result\":{{\"ok\":true}}}}'\nexit 0\n'''\n"
    )
}

/// A repository with the play committed on `main`, and `.gitignore`d
/// files the test asks for.
pub(crate) fn repo(workspace: &str, ops: &[String]) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    git(d, &["init", "-q", "-b", "main"]);
    let play = format!("{HEAD}{workspace}\n{}", ops.join("\n"));
    std::fs::write(d.join("p.toml"), play).unwrap();
    std::fs::write(d.join(".gitignore"), ".playdeck/\n.env\n").unwrap();
    std::fs::write(d.join("README"), "the project\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "the play"]);
    t
}

pub(crate) const WORKTREE: &str = "[workspace]\nisolation = \"worktree\"\n";

pub(crate) fn headless(d: &Path) -> std::process::Command {
    let mut c = common::playdeck();
    c.args([
        "run",
        "--headless",
        "--run-dir",
        ".playdeck/runs/k1",
        "p.toml",
    ])
    .current_dir(d);
    c
}

pub(crate) fn run(d: &Path) -> Output {
    headless(d).stdin(Stdio::null()).output().unwrap()
}

pub(crate) fn events(d: &Path) -> Vec<Value> {
    playdeck::store::whole_text(&d.join(".playdeck/runs/k1/events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub(crate) fn of<'a>(evs: &'a [Value], ty: &str, name: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| e["type"] == ty && e["name"] == name)
        .collect()
}

pub(crate) fn show(d: &Path, what: &str) -> String {
    git(d, &["show", &format!("playdeck/k1:{what}")])
}

pub(crate) fn said(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A chain and a fan-in: what depends on an operation starts from a tree
/// with its work; independent work merges cleanly; the user's branch is
/// untouched until `land --into`; the report lists what landed.
#[test]
fn a_downstream_operation_builds_on_the_work_its_dependencies_landed() {
    let t = repo(
        WORKTREE,
        &[
            op("a", &[], "echo alpha > a.txt", ""),
            op("b", &[], "echo beta > b.txt", ""),
            op("c", &["a", "b"], "cat a.txt b.txt > c.txt", ""),
        ],
    );
    let d = t.path();
    let main_before = git(d, &["rev-parse", "main"]);
    let out = run(d);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // c saw both: its file was made of theirs, in its own worktree.
    assert_eq!(show(d, "c.txt"), "alpha\nbeta\n");
    assert_eq!(show(d, "a.txt"), "alpha\n");
    let evs = events(d);
    for name in ["a", "b", "c"] {
        let landed = of(&evs, "landed", name);
        assert_eq!(landed.len(), 1, "{name}: {landed:?}");
        assert_eq!(landed[0]["mode"], "merge");
        assert_eq!(landed[0]["branch"], "playdeck/k1");
    }
    // The uncommitted file was committed for it, named after it.
    let c = of(&evs, "landed", "c")[0];
    assert!(
        c["commits"][0]
            .as_str()
            .unwrap()
            .ends_with("c: cat a.txt b.txt > c.txt"),
        "{c}"
    );
    assert_eq!(c["files"], serde_json::json!(["c.txt"]));
    // Landing came before success: c started after both landed.
    let seq = |ty: &str, name: &str| of(&evs, ty, name)[0]["seq"].as_u64().unwrap();
    assert!(seq("landed", "a") < seq("started", "c"));
    assert!(seq("landed", "b") < seq("started", "c"));
    // Nothing of the run is left in the way: worktrees and op branches go.
    assert_eq!(
        git(d, &["rev-parse", "main"]),
        main_before,
        "main untouched"
    );
    let branches = git(d, &["branch", "--format=%(refname:short)"]);
    assert_eq!(branches.trim(), "main\nplaydeck/k1", "{branches}");
    assert_eq!(git(d, &["worktree", "list"]).lines().count(), 1);
    // The report says what landed, per operation.
    let r = common::playdeck()
        .args(["report", "k1"])
        .current_dir(d)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("## Landed"), "{text}");
    assert!(text.contains("### c (merge at "), "{text}");
    assert!(text.contains("- files: c.txt"), "{text}");

    // Into the user's branch: a fast-forward.
    let l = common::playdeck()
        .args(["land", "k1", "--into", "main"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(l.status.code(), Some(0), "{}", said(&l));
    assert!(said(&l).contains("fast-forward"), "{}", said(&l));
    assert_eq!(
        std::fs::read_to_string(d.join("c.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    assert_eq!(
        git(d, &["rev-parse", "main"]),
        git(d, &["rev-parse", "playdeck/k1"])
    );
    // Again: nothing to land.
    let again = common::playdeck()
        .args(["land", "k1", "--into", "main"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert!(said(&again).contains("nothing to land"), "{}", said(&again));
}

/// `land --into` refuses a dirty checkout and a branch that moved on,
/// unless --merge; with --merge it makes a merge commit.
#[test]
fn landing_into_a_branch_refuses_what_it_cannot_do_cleanly() {
    let t = repo(WORKTREE, &[op("a", &[], "echo alpha > a.txt", "")]);
    let d = t.path();
    assert_eq!(run(d).status.code(), Some(0));
    let land = |args: &[&str]| {
        common::playdeck()
            .args(["land", "k1"])
            .args(args)
            .current_dir(d)
            .output()
            .unwrap()
    };
    let none = land(&["--into", "nope"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        said(&none).contains("there is no branch \"nope\""),
        "{}",
        said(&none)
    );
    // Dirty: a tracked file changed in the checkout of main.
    std::fs::write(d.join("README"), "changed\n").unwrap();
    let dirty = land(&["--into", "main"]);
    assert_eq!(dirty.status.code(), Some(1));
    assert!(
        said(&dirty).contains("uncommitted changes (README)"),
        "{}",
        said(&dirty)
    );
    git(d, &["checkout", "-q", "README"]);
    // main moves on: no fast-forward.
    std::fs::write(d.join("mine.txt"), "mine\n").unwrap();
    git(d, &["add", "mine.txt"]);
    git(d, &["commit", "-q", "-m", "mine"]);
    let diverged = land(&["--into", "main"]);
    assert_eq!(diverged.status.code(), Some(1));
    assert!(
        said(&diverged).contains("main has 1 commit(s) the run's branch playdeck/k1 does not"),
        "{}",
        said(&diverged)
    );
    assert!(!d.join("a.txt").exists(), "nothing landed");
    let merged = land(&["--into", "main", "--merge"]);
    assert_eq!(merged.status.code(), Some(0), "{}", said(&merged));
    assert!(said(&merged).contains("merge commit"), "{}", said(&merged));
    assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "alpha\n");
    assert!(d.join("mine.txt").exists());
    let parents = git(d, &["log", "-1", "--format=%P", "main"]);
    assert_eq!(parents.split_whitespace().count(), 2, "a merge commit");
}

/// Two operations write the same file differently: the first lands, the
/// second is a conflict; headless with nobody to ask it fails
/// `merge_conflict` naming the path, its worktree kept.
#[test]
fn a_conflict_with_nobody_to_ask_fails_naming_the_paths() {
    let t = repo(
        WORKTREE,
        &[
            op("a", &[], "echo one > clash.txt", ""),
            op("b", &["a"], "echo two > other.txt", ""),
            op("x", &[], AFTER_A, ""),
        ],
    );
    let d = t.path();
    let out = run(d);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let evs = events(d);
    let failed = of(&evs, "failed", "x");
    assert_eq!(failed.len(), 1, "{evs:?}");
    assert_eq!(failed[0]["category"], "merge_conflict", "{}", failed[0]);
    let msg = failed[0]["error"].as_str().unwrap_or_default().to_string()
        + failed[0]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("clash.txt"), "{}", failed[0]);
    let asked = of(&evs, "permission_asked", "x");
    assert_eq!(asked[0]["kind"], "conflict");
    assert!(asked[0]["tool"].as_str().unwrap().contains("clash.txt"));
    // What landed first stays; the clashing work is kept, not lost.
    assert_eq!(show(d, "clash.txt"), "one\n");
    let kept = d.join(".playdeck/runs/k1/work/x");
    assert_eq!(
        std::fs::read_to_string(kept.join("clash.txt")).unwrap(),
        "three\n"
    );
    assert!(of(&evs, "landed", "x").is_empty());
}

/// Waits for `a` to land on the run's branch (the worktree sees the
/// repository's branches), then writes the file `a` wrote, differently:
/// both started from the same tree, so the two clash.
pub(crate) const AFTER_A: &str = "until git log --format=%s playdeck/k1 | grep -q '^land a:'; do sleep 0.05; done\necho three > clash.txt";

/// A headless run whose operator is on stdin.
pub(crate) struct Live {
    pub(crate) child: std::process::Child,
    pub(crate) lines: common::JsonLines,
    _err: tempfile::TempDir,
}

impl Live {
    pub(crate) fn start(d: &Path) -> Live {
        let err = tempfile::tempdir().unwrap();
        let (file, path) = common::stderr_file(err.path(), "run.stderr");
        let mut child = headless(d)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .unwrap();
        let lines = common::JsonLines::read(&mut child, Some(path));
        Live {
            child,
            lines,
            _err: err,
        }
    }

    pub(crate) fn asked(&mut self, name: &str, kind: &str) -> Value {
        self.lines.until(
            &format!("{name} asks ({kind})"),
            Duration::from_secs(60),
            |v| v["type"] == "permission_asked" && v["name"] == name && v["kind"] == kind,
        )
    }

    /// What the run has said on stderr so far (answers to control lines).
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(self._err.path().join("run.stderr")).unwrap_or_default()
    }

    pub(crate) fn say(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes stdin and waits for the end; the exit code.
    pub(crate) fn finish(mut self) -> i32 {
        drop(self.child.stdin.take());
        self.lines
            .until("the result", Duration::from_secs(60), |v| {
                v["type"] == "result"
            });
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

/// The operator resolves a conflict in the kept worktree (merging the
/// run's branch there, as `S` lets them) and `resolve` lands it.
#[test]
fn a_conflict_resolved_in_its_worktree_lands_once_resolved() {
    let t = repo(
        WORKTREE,
        &[
            op("a", &[], "echo one > clash.txt", ""),
            op("x", &[], AFTER_A, ""),
        ],
    );
    let d = t.path();
    let mut live = Live::start(d);
    let asked = live.asked("x", "conflict");
    assert!(
        asked["tool"].as_str().unwrap().contains("clash.txt"),
        "{asked}"
    );
    resolve_by_hand(d);
    live.say("resolve x");
    live.lines.until("x lands", Duration::from_secs(60), |v| {
        v["type"] == "landed" && v["name"] == "x"
    });
    assert_eq!(live.finish(), 0);
    assert_eq!(show(d, "clash.txt"), "one and three\n");
}

/// What the operator does in `x`'s kept worktree to resolve its clash
/// with `a` (as `S` lets them): merges the run's branch there, which
/// clashes, settles the file and commits.
pub(crate) fn resolve_by_hand(d: &Path) {
    let wt = d.join(".playdeck/runs/k1/work/x");
    let merged = std::process::Command::new("git")
        .arg("-C")
        .arg(&wt)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "merge",
            "-q",
            "playdeck/k1",
        ])
        .output()
        .unwrap();
    assert!(!merged.status.success(), "the clash is real");
    std::fs::write(wt.join("clash.txt"), "one and three\n").unwrap();
    git(&wt, &["add", "clash.txt"]);
    git(
        &wt,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--no-edit",
        ],
    );
}

/// `review = true`: the work waits before it lands; approve lands it.
/// Rejected, nothing lands and what depends on it is skipped.
#[test]
fn reviewed_work_lands_when_approved_and_not_when_rejected() {
    let ops = [
        op("a", &[], "echo alpha > a.txt", "review = true"),
        op("b", &["a"], "cat a.txt > b.txt", ""),
    ];
    let t = repo(WORKTREE, &ops);
    let d = t.path();
    let mut live = Live::start(d);
    let asked = live.asked("a", "review");
    assert!(
        asked["tool"].as_str().unwrap().contains("1 file changed"),
        "{asked}"
    );
    // Nothing has landed while it waits.
    assert!(
        git(d, &["ls-tree", "--name-only", "playdeck/k1"])
            .lines()
            .all(|f| f != "a.txt")
    );
    live.say("approve a");
    assert_eq!(live.finish(), 0);
    assert_eq!(show(d, "b.txt"), "alpha\n");

    let t = repo(WORKTREE, &ops);
    let d = t.path();
    let mut live = Live::start(d);
    live.asked("a", "review");
    live.say("deny a not this way");
    assert_eq!(live.finish(), 1);
    let evs = events(d);
    let failed = of(&evs, "failed", "a");
    assert_eq!(failed[0]["category"], "review_rejected", "{}", failed[0]);
    assert!(
        failed[0].to_string().contains("not this way"),
        "{}",
        failed[0]
    );
    assert_eq!(of(&evs, "skipped", "b").len(), 1);
    assert!(of(&evs, "landed", "a").is_empty());
    assert!(
        git(d, &["ls-tree", "--name-only", "playdeck/k1"])
            .lines()
            .all(|f| f != "a.txt")
    );
}

/// Sent back from review with a note: a new attempt, in the same worktree,
/// is told it; what it does then is what lands.
#[test]
fn reviewed_work_sent_back_with_a_note_lands_what_the_next_attempt_did() {
    // The agent names its conversation; the rest of its prompt after its
    // script is a here-document, from which it keeps what the operator says
    // (how an attempt begun afresh is told).
    let script = "echo '{\"type\":\"session\",\"id\":\"s-1\"}'\necho alpha > a.txt\necho '{\"type\":\"result\",\"result\":{\"ok\":true}}'\nsed -n 's/^The operator says: //p' > note.txt <<'REST'";
    let agent = format!(
        "[[operations]]\nid = \"a\"\nrole = \"implementer\"\nagent = \"sh\"\nreview = true\ninstruction = '''\n{script}\n'''\n"
    );
    let t = repo(WORKTREE, &[agent]);
    let d = t.path();
    let mut live = Live::start(d);
    live.asked("a", "review");
    live.say("say a use blue");
    // The next attempt asks again, with its work.
    let again = live
        .lines
        .until("a asks again", Duration::from_secs(60), |v| {
            v["type"] == "permission_asked" && v["name"] == "a" && v["attempt"] == 2
        });
    assert_eq!(again["kind"], "review");
    live.say("approve a");
    assert_eq!(live.finish(), 0);
    assert_eq!(show(d, "note.txt"), "use blue");
    assert_eq!(show(d, "a.txt"), "alpha\n");
}

/// `include` copies a file git ignores into each new worktree; `setup`
/// runs there first, its output in the attempt's setup log; a failed setup
/// fails the attempt `setup_failed`.
#[test]
fn a_new_worktree_gets_included_files_and_its_setup_runs_first() {
    let ws = format!(
        "{WORKTREE}include = [\".env\"]\nsetup = [\"echo ready > .env.setup\", \"echo set up\"]\n"
    );
    let t = repo(&ws, &[op("a", &[], "cat .env .env.setup > seen.txt", "")]);
    let d = t.path();
    std::fs::write(d.join(".env"), "TOKEN=local\n").unwrap();
    std::fs::write(d.join(".gitignore"), ".playdeck/\n.env\n.env.setup\n").unwrap();
    git(d, &["commit", "-qam", "ignore the setup's file"]);
    let out = run(d);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(show(d, "seen.txt"), "TOKEN=local\nready\n");
    let tree = git(d, &["ls-tree", "--name-only", "playdeck/k1"]);
    assert!(!tree.lines().any(|f| f.starts_with(".env")), "{tree}");
    let log = std::fs::read_to_string(d.join(".playdeck/runs/k1/logs/a.1.setup.log")).unwrap();
    assert!(log.contains("$ echo set up\nset up\n"), "{log}");

    let ws = format!("{WORKTREE}setup = [\"echo no npm here >&2; exit 3\"]\n");
    let t = repo(&ws, &[op("a", &[], "echo alpha > a.txt", "")]);
    let d = t.path();
    let out = run(d);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(d);
    let failed = of(&evs, "failed", "a");
    assert_eq!(failed[0]["category"], "setup_failed", "{}", failed[0]);
    assert!(
        failed[0].to_string().contains("(exit status: 3)"),
        "{}",
        failed[0]
    );
}

/// The run stops (SIGKILL) after an operation's work is committed, before
/// it lands — and again after it lands, before that is recorded. Resumed,
/// it lands exactly once.
#[test]
fn a_crash_around_landing_lands_the_work_exactly_once() {
    for point in ["before_land", "after_land"] {
        let t = repo(
            WORKTREE,
            &[
                op("a", &[], "echo alpha > a.txt", ""),
                op("b", &["a"], "cat a.txt > b.txt", ""),
            ],
        );
        let d = t.path();
        let killed = headless(d)
            .env("PLAYDECK_FAULT_KILL_AT", point)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            killed.status.code(),
            None,
            "{point}: killed: {}",
            said(&killed)
        );
        let resumed = common::playdeck()
            .args(["resume", "--headless", ".playdeck/runs/k1"])
            .current_dir(d)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            resumed.status.code(),
            Some(0),
            "{point}: {}",
            said(&resumed)
        );
        let lands = git(
            d,
            &[
                "log",
                "--format=%s",
                "--grep=^Playdeck-Op: a$",
                "playdeck/k1",
            ],
        );
        assert_eq!(
            lands.lines().count(),
            2,
            "{point}: one commit of a's work, one landing: {lands}"
        );
        assert_eq!(show(d, "b.txt"), "alpha\n", "{point}");
    }
}

/// `land = "rebase"`: the operations' commits replayed on the run's
/// branch, no merge commits. `land = "none"`: nothing lands, each
/// operation's work stays on its own branch. `commit = false`: only the
/// agent's own commits land, and a worktree left with changes is kept.
#[test]
fn rebase_lands_a_straight_history_and_none_keeps_work_on_its_own_branch() {
    let ops = [
        op("a", &[], "echo alpha > a.txt", ""),
        op("b", &[], "echo beta > b.txt", ""),
    ];
    let t = repo(&format!("{WORKTREE}land = \"rebase\"\n"), &ops);
    let d = t.path();
    let out = run(d);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(show(d, "a.txt"), "alpha\n");
    assert_eq!(show(d, "b.txt"), "beta\n");
    assert_eq!(
        git(d, &["log", "--merges", "--format=%h", "playdeck/k1"]),
        ""
    );
    assert_eq!(
        git(d, &["rev-list", "--count", "main..playdeck/k1"]).trim(),
        "2",
        "one commit each"
    );
    assert_eq!(of(&events(d), "landed", "a")[0]["mode"], "rebase");

    let t = repo(&format!("{WORKTREE}land = \"none\"\n"), &ops);
    let d = t.path();
    assert_eq!(run(d).status.code(), Some(0));
    assert_eq!(
        git(d, &["rev-parse", "playdeck/k1"]),
        git(d, &["rev-parse", "main"])
    );
    assert_eq!(
        git(d, &["show", "playdeck/k1-ops/a:a.txt"]),
        "alpha\n",
        "its work is on its own branch"
    );
    assert!(of(&events(d), "landed", "a").is_empty());

    let t = repo(
        &format!("{WORKTREE}commit = false\n"),
        &[op("a", &[], "echo alpha > a.txt", "")],
    );
    let d = t.path();
    let out = run(d);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        git(d, &["rev-parse", "playdeck/k1"]),
        git(d, &["rev-parse", "main"])
    );
    let kept = d.join(".playdeck/runs/k1/work/a");
    assert_eq!(
        std::fs::read_to_string(kept.join("a.txt")).unwrap(),
        "alpha\n"
    );
    let warned = events(d)
        .into_iter()
        .any(|e| e["type"] == "warning" && e["message"].as_str().unwrap_or("").contains("kept "));
    assert!(warned, "the kept worktree is said");
}

/// `review = true` on a role profile holds the work of every operation on
/// its instances; under `--approve all` the policy lands it, said so. Its
/// `git-worktree` gives way to the operation's own worktree.
#[test]
fn a_role_profiles_review_holds_the_work_of_operations_on_its_instances() {
    let ws = format!(
        "{WORKTREE}[capacity]\nmax_nodes = 1\n[role_profiles.coder]\nrole = \"implementer\"\nprovider = \"sh\"\nmax_instances = 1\nworkspace_mode = \"git-worktree\"\nreview = true\n"
    );
    let t = repo(&ws, &[op("a", &[], "echo alpha > a.txt", "")]);
    let d = t.path();
    let out = headless(d)
        .args(["--approve", "all"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let evs = events(d);
    assert_eq!(of(&evs, "permission_asked", "a")[0]["kind"], "review");
    let answered = of(&evs, "permission_answered", "a");
    assert_eq!(answered[0]["by"], "policy");
    assert_eq!(answered[0]["allowed"], true);
    assert_eq!(show(d, "a.txt"), "alpha\n");
    assert!(
        said(&out).contains("workspace_mode = \"git-worktree\" gives way to [workspace] isolation"),
        "{}",
        said(&out)
    );
    let branches = git(d, &["branch", "--format=%(refname:short)"]);
    assert_eq!(
        branches.trim(),
        "main\nplaydeck/k1",
        "no instance branch: {branches}"
    );
}
