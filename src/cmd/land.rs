//! `playdeck land RUN --into BRANCH [--merge]`.

use super::{CmdError, Outcome, block_on};
use playdeck::land::LandingFile;
use playdeck::land::into::{Done, land_into};

pub fn land(which: &str, into: &str, merge: bool) -> Outcome {
    let dir = playdeck::control::resolve_run(which)
        .map_err(|e| CmdError::Input(format!("land: {}", e.message)))?;
    let rec = LandingFile::read(&dir).ok_or_else(|| {
        CmdError::Input(format!(
            "land: the run in {} has no branch of its own: its play has no [workspace] isolation = \"worktree\"",
            dir.display()
        ))
    })?;
    let made: Vec<String> = rec.made().map(str::to_string).collect();
    let done = block_on(false, land_into(&rec.repo, &rec.branch, &made, into, merge))?
        .map_err(|e| CmdError::Failed(format!("land: refused: {e}")))?;
    let branch = &rec.branch;
    match done {
        Done::AlreadyThere => say!("{into} has the work of {branch} already: nothing to land"),
        Done::FastForward { from, to, commits } => {
            say!("landed {branch} into {into}: fast-forward {from}..{to} ({commits} commit(s))");
        }
        Done::Merged { commit, commits } => {
            say!(
                "landed {branch} into {into}: merge commit {commit} ({commits} commit(s) brought in)"
            );
        }
    }
    Ok(0)
}
