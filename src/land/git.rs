//! git, run as a program (never a library): what the user's own git would
//! do, with their config and identity (a fallback identity where there is
//! none). Every call names the directory and the command when it fails.
//!
//! Every call carries `gitguard`'s guard: no hook, and no driver the
//! repository's own config names (an agent of the run can write it).
//! Diffs shown to the operator add `--no-textconv --no-ext-diff`.

use std::ffi::OsStr;
use std::path::Path;

/// What git said when it failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("git -C {dir} {args}: {said}")]
pub struct GitError {
    pub dir: String,
    pub args: String,
    pub said: String,
}

/// One git command's output, whatever its exit code.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// The identity playdeck commits as when the repository has none (a CI
/// machine's fresh clone): git refuses to commit without one.
const FALLBACK_IDENTITY: [&str; 4] = [
    "-c",
    "user.name=playdeck",
    "-c",
    "user.email=playdeck@localhost",
];

/// `-c KEY=` for each driver the repository's own config names, listed
/// now (see `gitguard`).
async fn drivers_off(dir: &Path) -> Vec<String> {
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(crate::gitguard::DRIVERS_LISTED)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    out.map(|o| crate::gitguard::drivers_off(&o.stdout))
        .unwrap_or_default()
}

/// An operation's worktree as git is told it: its work tree and its own
/// git directory (`<common>/worktrees/<id>`), both named, so a worktree
/// whose `.git` an agent removed or rewrote is never taken for the
/// repository above it.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    pub work: &'a Path,
    pub git_dir: &'a Path,
}

/// Runs `git -C dir ARGS`; any exit code is an answer.
pub async fn run<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<Output, GitError> {
    exec(dir, None, args).await
}

/// Runs git in an operation's worktree; any exit code is an answer.
pub async fn run_in<S: AsRef<OsStr>>(t: Tree<'_>, args: &[S]) -> Result<Output, GitError> {
    exec(t.work, Some(t.git_dir), args).await
}

/// [`ok`] in an operation's worktree.
pub async fn ok_in<S: AsRef<OsStr>>(t: Tree<'_>, args: &[S]) -> Result<String, GitError> {
    said(t.work, args, run_in(t, args).await?)
}

/// [`line`] in an operation's worktree.
pub async fn line_in<S: AsRef<OsStr>>(t: Tree<'_>, args: &[S]) -> Result<String, GitError> {
    Ok(first(ok_in(t, args).await?))
}

async fn exec<S: AsRef<OsStr>>(
    dir: &Path,
    git_dir: Option<&Path>,
    args: &[S],
) -> Result<Output, GitError> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir);
    if let Some(g) = git_dir {
        cmd.arg("--git-dir").arg(g).arg("--work-tree").arg(dir);
    }
    cmd.args(crate::gitguard::NOTHING_RUNS)
        .args(drivers_off(git_dir.unwrap_or(dir)).await);
    if !has_identity(dir) {
        cmd.args(FALLBACK_IDENTITY);
    }
    let out = cmd
        .args(args)
        .stdin(std::process::Stdio::null())
        // Never an editor or a pager: nobody is at this git's terminal.
        .env("GIT_EDITOR", "true")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| error(dir, args, &format!("cannot run git: {e}")))?;
    Ok(Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs `git -C dir ARGS`; its stdout, or an error with what it said.
pub async fn ok<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<String, GitError> {
    said(dir, args, run(dir, args).await?)
}

fn said<S: AsRef<OsStr>>(dir: &Path, args: &[S], out: Output) -> Result<String, GitError> {
    if out.ok() {
        Ok(out.stdout)
    } else {
        let said = if out.stderr.trim().is_empty() {
            out.stdout.trim()
        } else {
            out.stderr.trim()
        };
        Err(error(dir, args, said))
    }
}

/// The first line of `git -C dir ARGS`, trimmed.
pub async fn line<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<String, GitError> {
    Ok(first(ok(dir, args).await?))
}

fn first(out: String) -> String {
    out.lines().next().unwrap_or("").trim().to_string()
}

pub fn error<S: AsRef<OsStr>>(dir: &Path, args: &[S], said: &str) -> GitError {
    GitError {
        dir: dir.display().to_string(),
        args: args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" "),
        said: said.to_string(),
    }
}

/// Whether git knows who commits in `dir`: asked once per process (a
/// run has one repository; its worktrees share its config).
fn has_identity(dir: &Path) -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        ["user.email", "user.name"].iter().all(|key| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(["config", "--get", key])
                .stdin(std::process::Stdio::null())
                .output()
                .is_ok_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty())
        })
    })
}

/// The paths git left unmerged in a worktree (a rebase that stopped).
pub async fn unmerged(t: Tree<'_>) -> Vec<String> {
    ok_in(t, &["diff", "--name-only", "--diff-filter=U", "-z"])
        .await
        .map(|s| {
            s.split('\0')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
