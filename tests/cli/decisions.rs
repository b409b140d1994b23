//! Issue 55, through the binary against real git repositories: what the
//! operator decides is what happens — a review lands exactly the commits
//! it showed, a decision made on what is no longer there is refused, the
//! run's branch is the run's alone, and the review loop holds.

use crate::common;
use crate::landing::{
    AFTER_A, HEAD, Live, WORKTREE, events, of, op, repo, resolve_by_hand, run, said, show,
};

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use common::git;
use serde_json::Value;

/// `playdeck ctl ARGS…` on the run `k1`, from the repository.
fn ctl(d: &Path, args: &[&str]) -> Output {
    common::playdeck()
        .args(["ctl", ".playdeck/runs/k1"])
        .args(args)
        .current_dir(d)
        .output()
        .unwrap()
}

/// `review@SEQ:ON`: the basis a `permission_asked` line shows.
fn basis_of(asked: &Value) -> String {
    format!(
        "review@{}:{}",
        asked["seq"],
        asked["on"].as_str().expect("a review names its commits")
    )
}

/// `git -c user… ARGS` in `dir`: a commit made by hand.
fn commit_by_hand(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["add", file]);
    git(
        dir,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            file,
        ],
    );
}

fn report(d: &Path) -> String {
    let r = common::playdeck()
        .args(["report", "k1"])
        .current_dir(d)
        .output()
        .unwrap();
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// A commit made in the worktree after the review was shown is not
/// landed with the approval: what was shown lands, and the rest comes back
/// for review; an approval on the first review's commits is then refused
/// as stale, saying what waits now.
#[test]
fn a_review_lands_exactly_the_commits_it_showed() {
    let t = repo(
        WORKTREE,
        &[op("a", &[], "echo alpha > a.txt", "review = true")],
    );
    let d = t.path();
    let mut live = Live::start(d);
    let first = live.asked("a", "review");
    let shown = basis_of(&first);
    // Someone (an agent's leftover process, a hand) commits in the
    // worktree while the review waits.
    let wt = d.join(".playdeck/runs/k1/work/a");
    commit_by_hand(&wt, "extra.txt", "not reviewed\n");
    live.say(&format!("approve a --on {shown}"));
    live.lines.until("a lands", Duration::from_secs(60), |v| {
        v["type"] == "landed" && v["name"] == "a"
    });
    assert_eq!(show(d, "a.txt"), "alpha\n");
    let tree = git(d, &["ls-tree", "--name-only", "playdeck/k1"]);
    assert!(
        !tree.lines().any(|f| f == "extra.txt"),
        "not landed with it: {tree}"
    );
    // It comes back for review, with the commit that was not shown.
    let again = live
        .lines
        .until("a's review again", Duration::from_secs(60), |v| {
            v["type"] == "permission_asked" && v["name"] == "a" && v["seq"] != first["seq"]
        });
    assert!(
        again["detail"].as_str().unwrap().contains("extra.txt"),
        "{again}"
    );
    // Approved on what was shown first: refused, and what waits is said.
    live.say(&format!("approve a --on {shown}"));
    common::wait_for("the stale approval said", Duration::from_secs(30), || {
        let err = live.stderr();
        if err.contains("its work came back for review with other commits") {
            Ok(())
        } else {
            Err(err)
        }
    });
    assert!(
        live.stderr()
            .contains(&format!("--on {}", basis_of(&again)))
    );
    // Without a basis it is decided on what is there now, and said.
    live.say("approve a");
    assert_eq!(live.finish(), 0);
    assert_eq!(show(d, "extra.txt"), "not reviewed\n");
    let evs = events(d);
    assert_eq!(of(&evs, "landed", "a").len(), 2, "two landings");
    // The report lists both landings and both approvals, with the commits.
    let text = report(d);
    assert_eq!(text.matches("### a (merge at ").count(), 2, "{text}");
    assert_eq!(
        text.matches("a **review approved: landed** by stdin")
            .count(),
        2,
        "{text}"
    );
    assert!(text.contains(first["on"].as_str().unwrap()), "{text}");
}

/// An agent that checks the run's branch out in its worktree and commits
/// on it: nothing of it lands, the run says at once that its branch moved
/// and puts it back (the commit kept on a branch of its own), and `land
/// --into` never takes a commit no landing made.
#[test]
fn the_runs_branch_moves_only_by_the_runs_own_landings() {
    let sneak = "git checkout -q playdeck/k1\necho evil > evil.txt\ngit add evil.txt\ngit -c user.name=a -c user.email=a@a commit -qm sneak";
    let t = repo(
        WORKTREE,
        &[
            op("a", &[], sneak, ""),
            op("b", &["a"], "echo beta > b.txt", ""),
            op("c", &[], "echo gamma > c.txt", ""),
        ],
    );
    let d = t.path();
    let out = run(d);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let evs = events(d);
    let failed = of(&evs, "failed", "a");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("moved its worktree off its branch"),
        "{}",
        failed[0]
    );
    let warned = evs
        .iter()
        .filter(|e| e["type"] == "warning")
        .filter_map(|e| e["message"].as_str())
        .find(|m| m.contains("moved under it"))
        .unwrap_or_else(|| panic!("the move is said: {evs:?}"))
        .to_string();
    assert!(warned.contains("sneak"), "{warned}");
    let tree = git(d, &["ls-tree", "--name-only", "playdeck/k1"]);
    assert!(!tree.lines().any(|f| f == "evil.txt"), "{tree}");
    assert!(
        tree.lines().any(|f| f == "c.txt"),
        "the rest landed: {tree}"
    );
    let kept = git(d, &["branch", "--list", "playdeck/k1-foreign/*"]);
    assert!(!kept.trim().is_empty(), "the commit is kept: {kept}");
    // Into main: the run's own work only.
    let land = |args: &[&str]| {
        common::playdeck()
            .args(["land", "k1", "--into", "main"])
            .args(args)
            .current_dir(d)
            .output()
            .unwrap()
    };
    let main_before = git(d, &["rev-parse", "main"]);
    // Moved again once the run is over: refused, naming the commit.
    let evil = git(d, &["rev-parse", kept.trim().trim_start_matches("* ")]);
    git(d, &["update-ref", "refs/heads/playdeck/k1", evil.trim()]);
    let refused = land(&[]);
    assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
    assert!(
        said(&refused).contains("no landing of the run made") && said(&refused).contains("sneak"),
        "{}",
        said(&refused)
    );
    assert_eq!(
        git(d, &["rev-parse", "main"]),
        main_before,
        "main untouched"
    );
    assert!(!d.join("evil.txt").exists());
}

/// A run directory whose name is no branch name still gets a branch;
/// `.playdeck/` is ignored by git from the start; files left uncommitted
/// when the run began are said to be outside its base.
#[test]
fn a_run_anywhere_gets_a_branch_keeps_out_of_git_and_says_what_it_left_out() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    git(d, &["init", "-q", "-b", "main"]);
    let play = format!(
        "{HEAD}{WORKTREE}\n{}",
        op("a", &[], "echo alpha > a.txt", "")
    );
    std::fs::write(d.join("p.toml"), play).unwrap();
    std::fs::write(d.join("README"), "the project\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "the play"]);
    // Edited, and new, but not committed.
    std::fs::write(d.join("README"), "changed\n").unwrap();
    std::fs::write(d.join("notes.txt"), "mine\n").unwrap();
    let out = common::playdeck()
        .args(["run", "--headless", "--run-dir", ".hidden", "p.toml"])
        .current_dir(d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 uncommitted files are not in the run's base")
            && err.contains("README")
            && err.contains("notes.txt"),
        "{err}"
    );
    let branches = git(d, &["branch", "--format=%(refname:short)"]);
    let branch = branches
        .lines()
        .find(|b| b.starts_with("playdeck/hidden-"))
        .unwrap_or_else(|| panic!("a branch for .hidden: {branches}"));
    assert_eq!(git(d, &["show", &format!("{branch}:a.txt")]), "alpha\n");
    // `.playdeck/` (the console's logs) and `.hidden` are not the
    // repository's: a commit of everything takes neither.
    std::fs::create_dir_all(d.join("sub")).unwrap();
    let t2 = d.join("sub");
    git(&t2, &["init", "-q", "-b", "main"]);
    let play = format!(
        "{HEAD}{WORKTREE}\n{}",
        op("a", &[], "echo alpha > a.txt", "")
    );
    std::fs::write(t2.join("p.toml"), play).unwrap();
    git(&t2, &["add", "."]);
    git(&t2, &["commit", "-q", "-m", "the play"]);
    let out = common::playdeck()
        .args(["run", "--headless", "p.toml"])
        .current_dir(&t2)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        std::fs::read_to_string(t2.join(".playdeck/.gitignore"))
            .unwrap()
            .lines()
            .last(),
        Some("*")
    );
    git(&t2, &["add", "-A"]);
    let staged = git(&t2, &["diff", "--cached", "--name-only"]);
    assert!(
        !staged.contains(".playdeck"),
        "git add -A took playdeck's files: {staged}"
    );
    let evs: Vec<Value> = events_in(&t2);
    let ws = evs.iter().find(|e| e["type"] == "workspace").unwrap();
    assert!(ws["uncommitted"].is_null(), "nothing left out: {ws}");
}

fn events_in(d: &Path) -> Vec<Value> {
    let runs = d.join(".playdeck/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().join("events.jsonl").exists())
        .unwrap()
        .path();
    playdeck::store::whole_text(&run.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// An agent that names its conversation and counts its attempts in the run
/// directory; `attempt2` runs in its second attempt. What the operator
/// said reaches a fresh attempt in its prompt: it keeps everything from
/// `The operator says:` on in note.txt.
fn talking(attempt2: &str, extra: &str) -> String {
    let script = format!(
        "echo '{{\"type\":\"session\",\"id\":\"s-1\"}}'\nn=$(cat \"$PLAYDECK_RUN_DIR/count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$PLAYDECK_RUN_DIR/count\"\nif [ $n -eq 2 ]; then {attempt2}; fi\necho \"attempt $n\" > a.txt\necho '{{\"type\":\"result\",\"result\":{{\"ok\":true}}}}'\nsed -n '/^The operator says: /,$p' > note.txt <<'REST'"
    );
    format!(
        "[[operations]]\nid = \"a\"\nrole = \"implementer\"\nagent = \"sh\"\nindependent_root = true\n{extra}\ninstruction = '''\n{script}\n'''\n"
    )
}

/// `ctl status` counts a review as waiting on the operator and lists its
/// basis; `ctl say` on a review sends it back at once; two messages 0.3 s
/// apart both reach the agent, in order; `--json` after the words is the
/// option; the report lists the send-backs and the approval.
#[test]
fn a_review_sent_back_twice_in_quick_succession_hears_both() {
    let t = repo(WORKTREE, &[talking("sleep 3", "review = true")]);
    let d = t.path();
    let mut live = Live::start(d);
    live.asked("a", "review");
    let st = ctl(d, &["status", "--json"]);
    let v: Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v["running"], 0, "a review waits on the operator: {v}");
    assert_eq!(v["decisions"][0]["kind"], "review", "{v}");
    assert!(
        v["decisions"][0]["on"]
            .as_str()
            .unwrap()
            .starts_with("review@"),
        "{v}"
    );
    // A basis of another decision: refused, nothing done.
    let stale = ctl(d, &["approve", "a", "--on", "gate@1:00000000", "--json"]);
    assert_eq!(stale.status.code(), Some(1));
    let e: Value = serde_json::from_slice(&stale.stdout).unwrap();
    assert_eq!(e["error"]["code"], "stale_decision", "{e}");
    let first = ctl(d, &["say", "a", "use", "blue", "--json"]);
    assert_eq!(first.status.code(), Some(0), "{}", said(&first));
    let answer: Value = serde_json::from_slice(&first.stdout)
        .unwrap_or_else(|e| panic!("--json is the option: {e}: {}", said(&first)));
    assert_eq!(answer["done"], "decided", "{answer}");
    std::thread::sleep(Duration::from_millis(300));
    let second = ctl(d, &["say", "a", "and", "green"]);
    assert_eq!(second.status.code(), Some(0), "{}", said(&second));
    let back = live
        .lines
        .until("a's next review", Duration::from_secs(60), |v| {
            v["type"] == "permission_asked" && v["name"] == "a" && v["attempt"] == 3
        });
    assert_eq!(back["kind"], "review");
    live.say("approve a");
    assert_eq!(live.finish(), 0);
    let note = show(d, "note.txt");
    let (blue, green) = (note.find("use blue"), note.find("and green"));
    assert!(
        blue.is_some() && green.is_some() && blue < green,
        "both, in order: {note:?}"
    );
    let evs = events(d);
    let notes: Vec<&str> = of(&evs, "retried", "a")
        .iter()
        .filter_map(|r| r["note"].as_str())
        .collect();
    assert_eq!(notes[0], "use blue", "the words, not --json: {notes:?}");
    let text = report(d);
    assert!(text.contains("a **sent back** by ctl"), "{text}");
    assert!(text.contains(": use blue"), "{text}");
}

/// A message that waits for an agent in a tool call disputes the answer
/// that attempt gives: nothing of it lands, and the next attempt is told.
#[test]
fn a_message_waiting_for_an_attempt_keeps_its_work_from_landing() {
    let tool = "echo '{\"type\":\"state\",\"state\":\"tool\",\"tool\":\"Bash\"}'; touch \"$PLAYDECK_RUN_DIR/in-tool\"; sleep 2";
    // The first attempt is the one in a tool call here: count from 0.
    let script = talking("true", "").replace(
        "if [ $n -eq 2 ]; then true; fi",
        &format!("if [ $n -eq 1 ]; then {tool}; fi"),
    );
    let t = repo(WORKTREE, &[script]);
    let d = t.path();
    let live = Live::start(d);
    let marker = d.join(".playdeck/runs/k1/in-tool");
    common::wait_for("a in its tool call", Duration::from_secs(60), || {
        if marker.exists() {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    let said_to = ctl(d, &["say", "a", "not", "that", "way"]);
    assert_eq!(said_to.status.code(), Some(0), "{}", said(&said_to));
    assert_eq!(live.finish(), 0);
    let evs = events(d);
    let landed = of(&evs, "landed", "a");
    assert_eq!(landed.len(), 1, "{landed:?}");
    assert_eq!(landed[0]["attempt"], 2, "only the attempt told lands");
    assert_eq!(show(d, "a.txt"), "attempt 2\n");
    assert!(show(d, "note.txt").contains("not that way"));
}

/// Rejected at review with a reason: the reason is in the log and the
/// report, and a later retry continues the conversation told it.
#[test]
fn a_review_rejected_with_a_reason_is_told_to_its_retry() {
    // A gate keeps the run waiting for its operator after the rejection.
    let t = repo(
        WORKTREE,
        &[
            talking("true", "review = true"),
            op("z", &[], "true", "approval = true"),
        ],
    );
    let d = t.path();
    let mut live = Live::start(d);
    live.asked("a", "review");
    live.say("deny a no new dependencies");
    live.lines.until("a fails", Duration::from_secs(60), |v| {
        v["type"] == "failed" && v["name"] == "a"
    });
    live.say("retry a");
    let again = live
        .lines
        .until("a's review again", Duration::from_secs(60), |v| {
            v["type"] == "permission_asked" && v["name"] == "a" && v["attempt"] == 2
        });
    assert_eq!(again["kind"], "review");
    live.say("approve a");
    live.say("approve z");
    assert_eq!(live.finish(), 0);
    assert!(
        show(d, "note.txt").contains("no new dependencies"),
        "{}",
        show(d, "note.txt")
    );
    let text = report(d);
    assert!(
        text.contains("a **review rejected** by stdin") && text.contains(": no new dependencies"),
        "{text}"
    );
    assert!(text.contains("a **retried** by stdin"), "{text}");
}

/// A conflict that failed for want of an operator (headless, stdin
/// closed) is resolved by hand in its kept worktree, then landed by
/// `resume --resolve` without running its agent again.
#[test]
fn a_conflict_nobody_resolved_lands_later_without_its_agent() {
    let t = repo(
        WORKTREE,
        &[
            op("a", &[], "echo one > clash.txt", ""),
            op("x", &[], AFTER_A, ""),
        ],
    );
    let d = t.path();
    let out = run(d);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    resolve_by_hand(d);
    // --resolve on what did not fail on a conflict: refused, nothing run.
    let wrong = common::playdeck()
        .args([
            "resume",
            "--headless",
            ".playdeck/runs/k1",
            "--resolve",
            "a",
        ])
        .current_dir(d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(2), "{}", said(&wrong));
    let resumed = common::playdeck()
        .args([
            "resume",
            "--headless",
            ".playdeck/runs/k1",
            "--resolve",
            "x",
        ])
        .current_dir(d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", said(&resumed));
    assert_eq!(show(d, "clash.txt"), "one and three\n");
    let evs = events(d);
    let landed = of(&evs, "landed", "x");
    assert_eq!(landed.len(), 1, "{evs:?}");
    assert!(
        !d.join(".playdeck/runs/k1/logs/x.2.stdout.log").exists(),
        "its agent was not run again"
    );
    let text = report(d);
    assert!(
        text.contains("its merge conflict, resolved by hand"),
        "{text}"
    );
}
