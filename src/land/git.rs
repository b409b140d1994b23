//! git, run as a program (never a library): what the user's own git would
//! do, with their config and identity (a fallback identity where there is
//! none). Every call names the directory and the command when it fails.

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

/// Runs `git -C dir ARGS`; any exit code is an answer.
pub async fn run<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<Output, GitError> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir);
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
    let out = run(dir, args).await?;
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
    Ok(ok(dir, args)
        .await?
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
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

/// The paths git left unmerged in `dir` (a merge or rebase that stopped).
pub async fn unmerged(dir: &Path) -> Vec<String> {
    ok(dir, &["diff", "--name-only", "--diff-filter=U", "-z"])
        .await
        .map(|s| {
            s.split('\0')
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
