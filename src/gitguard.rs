//! What every git playdeck runs goes without, whatever the repository's
//! config says: an agent of the run (the same user) can write the shared
//! `config`, `hooks/` and `info/`, and nothing it puts there may run in
//! playdeck's git. So no hook, no fsmonitor, no signing program, and no
//! filter, diff or merge driver the repository's own config names (each
//! such key is overridden empty; drivers of the user's global and system
//! config, git-lfs among them, still work). Below every layer that runs
//! git: the run's landings (`land::git`) and the palette's instance
//! worktrees (`capacity`) use the same guard.

use std::path::Path;

/// `-c` pairs every call carries.
pub const NOTHING_RUNS: [&str; 8] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "diff.external=",
];

/// `git config ARGS` lists the keys of programs git would run for a
/// path's attributes, with the scope each comes from (reading config runs
/// nothing).
pub const DRIVERS_LISTED: [&str; 6] = [
    "config",
    "--show-scope",
    "--name-only",
    "-z",
    "--get-regexp",
    r"^(filter|diff|merge)\..+\.(clean|smudge|process|textconv|command|driver)$",
];

/// `-c KEY=` for each driver of that listing's output that the
/// repository's own config (local or worktree scope) names.
pub fn drivers_off(listed: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(listed);
    let mut fields = text.split('\0');
    let mut off = Vec::new();
    while let (Some(scope), Some(key)) = (fields.next(), fields.next()) {
        if matches!(scope, "local" | "worktree") {
            off.push("-c".to_string());
            off.push(format!("{key}="));
        }
    }
    off
}

/// Everything a git call in `dir` carries, its repository's drivers
/// listed now (a blocking call: for code off the async path).
pub fn guard(dir: &Path) -> Vec<String> {
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(DRIVERS_LISTED)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    NOTHING_RUNS
        .iter()
        .map(|s| s.to_string())
        .chain(drivers_off(&listed))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_repositorys_own_drivers_are_turned_off() {
        let listed =
            b"local\0filter.x.clean\0global\0filter.lfs.smudge\0worktree\0diff.nice.textconv\0";
        assert_eq!(
            super::drivers_off(listed),
            ["-c", "filter.x.clean=", "-c", "diff.nice.textconv="]
        );
    }
}
