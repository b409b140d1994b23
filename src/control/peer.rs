//! Who is on the other end of the control socket. Agents run as the same
//! user as playdeck, so the socket's file mode alone would let an agent
//! (model output driving a shell tool) approve its own gates, release
//! capacity or cancel the run. A request from one of the run's own agent
//! processes is refused: its peer's pid (SO_PEERCRED) carries the run's
//! tag in its environment, or descends from this playdeck process.
//!
//! The pid is the one that called `connect()`: an agent can fork, let the
//! child connect and exit, and keep the connected socket. So the peer is
//! decided from what cannot be lost: the process must still be there,
//! the same one (started no later than the connection was accepted, and
//! unchanged after it was looked at); when it is gone, or its pid now
//! names another process, the connection is treated as an agent's —
//! refused when in doubt.
//!
//! This is a guard against the ordinary path, not isolation: a process
//! running as the same user that neither carries the tag nor descends
//! from playdeck (one an agent had started by another service, or a
//! terminal it could type into) is not recognised, and a same-user
//! process can read the run directory or signal playdeck anyway.

use crate::agents::ancestry::{MAX_DEPTH, descends_from};
use crate::agents::process::RUN_TAG;

pub use crate::agents::ancestry::uptime_now;

/// Why the peer `pid`, which connected no later than `accepted` (uptime
/// seconds), counts as one of this run's agents (`tag` is the run
/// directory, as agents get it in `PLAYDECK_RUN_DIR`), or `None` for a
/// process that is neither — and is still the one that connected.
pub fn agent_of_this_run(pid: i32, tag: &str, accepted: Option<f64>) -> Option<String> {
    let gone = || {
        Some(format!(
            "the process that connected (pid {pid}) is gone, or its pid names another process now; refused as in doubt (an agent can connect from a child that exits)"
        ))
    };
    crate::agents::ancestry::while_the_same(pid, accepted, || agent_by_tag_or_ancestry(pid, tag))
        .unwrap_or_else(gone)
}

fn agent_by_tag_or_ancestry(pid: i32, tag: &str) -> Option<String> {
    let want = format!("{RUN_TAG}={tag}");
    if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
        && env.split(|&b| b == 0).any(|v| v == want.as_bytes())
    {
        return Some(format!("its environment carries {RUN_TAG} of this run"));
    }
    // Its environment can be emptied (`env -i`), its ancestry cannot:
    // every agent process and what it starts descend from playdeck, which
    // is also the reaper of their orphans. A walk that cannot finish (a
    // tree deeper than any a person's shell makes, or a parent it cannot
    // read) decides nothing: that peer is refused as in doubt.
    let me = std::process::id() as i32;
    match descends_from(pid, me, MAX_DEPTH) {
        Ok(true) => Some(format!(
            "it descends from this run's playdeck process (pid {me})"
        )),
        Ok(false) => None,
        Err(why) => Some(why),
    }
}

/// Who a peer is, as the run records it: `ctl (ana, pid 5678)` for
/// playdeck's own commands (named by their subcommand), else the program's
/// name (`socat (ana, pid 77)`). The program is the file the process runs
/// (`/proc/<pid>/exe`), not its `argv[0]`, which any process sets (`exec
/// -a playdeck`): only this very playdeck binary is named by its
/// subcommand, `console` among them.
pub fn actor_of(pid: i32, uid: u32) -> String {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let ours = exe.as_ref().is_some_and(|e| same_file(e, "/proc/self/exe"));
    let prog = exe.as_ref().and_then(|e| e.file_name()).map(|n| {
        n.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string()
    });
    let surface = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|c| {
            let mut args = c.split(|&b| b == 0).map(String::from_utf8_lossy);
            let _argv0 = args.next()?;
            let prog = if ours {
                "playdeck".to_string()
            } else {
                // Another program, or another playdeck binary: its file's
                // name, never a console's label.
                let p = prog.clone()?;
                if p == "playdeck" {
                    return Some("playdeck (another binary)".to_string());
                }
                return Some(p);
            };
            let sub = args.next().map(|a| a.to_string());
            Some(match sub {
                // A console (started by `run`, `resume` or `attach`) is
                // named as one; a bridge is a console on another machine.
                Some(sub) if prog == "playdeck" && matches!(&*sub, "run" | "resume" | "attach") => {
                    "console".to_string()
                }
                Some(sub) if prog == "playdeck" && sub == "bridge" => "ssh bridge".to_string(),
                Some(sub) if prog == "playdeck" && !sub.starts_with('-') => sub,
                _ => prog,
            })
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "the control socket".to_string());
    crate::paths::actor(&surface, uid, pid.max(0) as u32)
}

/// Whether two paths name the same file (device and inode).
fn same_file(a: &std::path::Path, b: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

#[cfg(test)]
fn parent_of(pid: i32) -> Option<i32> {
    crate::agents::ancestry::stat_of(pid).map(|s| s.parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A `sleep` child, once exec has set up its environment (for a moment
    /// after `/proc/<pid>/exe` changed, `environ` still reads empty).
    fn sleeper(env: Option<(&str, &str)>) -> std::process::Child {
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("5");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let ready = |pid: u32| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|p| p.to_string_lossy().contains("sleep"))
                && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| !e.is_empty())
        };
        while !ready(child.id()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    }

    #[test]
    fn a_child_of_this_process_is_recognised_and_its_parent_is_not() {
        let mut child = sleeper(None);
        let pid = child.id() as i32;
        let why = agent_of_this_run(pid, "/nowhere", uptime_now());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("descends from this run's playdeck process")),
            "{why:?}"
        );
        let parent = parent_of(std::process::id() as i32).unwrap();
        assert_eq!(agent_of_this_run(parent, "/nowhere", uptime_now()), None);
    }

    #[test]
    fn the_run_tag_in_the_environment_is_recognised() {
        let mut child = sleeper(Some((RUN_TAG, "/runs/r1")));
        let pid = child.id() as i32;
        let why = agent_of_this_run(pid, "/runs/r1", uptime_now());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            why.as_deref(),
            Some("its environment carries PLAYDECK_RUN_DIR of this run")
        );
    }

    /// A process gone by the time it is looked at (a child that connected
    /// and exited), or one started after the accept (a reused pid), is
    /// refused as in doubt.
    #[test]
    fn a_peer_that_is_gone_or_came_later_is_in_doubt() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let why = agent_of_this_run(pid, "/nowhere", uptime_now()).unwrap();
        assert!(why.contains("refused as in doubt"), "{why}");
        // Our own parent, as if the connection had been accepted before
        // it started.
        let parent = parent_of(std::process::id() as i32).unwrap();
        let why = agent_of_this_run(parent, "/nowhere", Some(0.0)).unwrap();
        assert!(why.contains("refused as in doubt"), "{why}");
    }

    /// An agent that nests its processes deeper than the walk goes, and
    /// runs the last with an empty environment, is still refused.
    #[test]
    fn a_peer_nested_deeper_than_the_walk_is_in_doubt() {
        let dir = tempfile::tempdir().unwrap();
        let nest = dir.path().join("nest.sh");
        std::fs::write(
            &nest,
            "#!/bin/sh\nif [ \"$1\" -gt 0 ]; then \"$0\" $(( $1 - 1 )) \"$2\"; else echo $$ > \"$2\"; exec env -i sleep 30; fi\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&nest, std::fs::Permissions::from_mode(0o755)).unwrap();
        let leaf = dir.path().join("leaf");
        let mut top = std::process::Command::new(&nest)
            .arg("140")
            .arg(&leaf)
            .process_group(0)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let pid = loop {
            if let Some(pid) = std::fs::read_to_string(&leaf)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| e.is_empty())
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the nest never finished"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let deep = descends_from(pid, std::process::id() as i32, 100);
        let why = agent_of_this_run(pid, "/nowhere", uptime_now());
        rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(top.id() as i32).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        top.wait().unwrap();
        // Past the limit: in doubt; within it: found.
        assert!(
            deep.as_ref()
                .is_err_and(|w| w.contains("refused as in doubt")),
            "{deep:?}"
        );
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("descends from this run's playdeck")),
            "{why:?}"
        );
    }

    /// `argv[0]` is the process's to choose (`exec -a playdeck`): the
    /// label comes from the file it runs.
    #[test]
    fn a_label_comes_from_the_program_run_not_argv0() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("attach"), "").unwrap();
        // argv: `playdeck attach -f`, the file run: tail (following the
        // file named attach).
        let mut child = std::process::Command::new("tail")
            .arg0("playdeck")
            .args(["attach", "-f"])
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.starts_with(b"playdeck\0attach"))
        {
            assert!(std::time::Instant::now() < deadline, "tail never ran");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let label = actor_of(pid, 0);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(label.starts_with("tail ("), "{label}");
        assert!(!label.contains("console"), "{label}");
    }
}
