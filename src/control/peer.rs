//! Who is on the other end of the control socket. Agents run as the same
//! user as playdeck, so the socket's file mode alone would let an agent
//! (model output driving a shell tool) approve its own gates, release
//! capacity or cancel the run. A request from one of the run's own agent
//! processes is refused: its peer's pid (SO_PEERCRED) carries the run's
//! tag in its environment, or descends from this playdeck process.
//!
//! This is a guard against the ordinary path, not isolation: a process
//! running as the same user that neither carries the tag nor descends
//! from playdeck (one an agent had started by another service, or a
//! terminal it could type into) is not recognised, and a same-user
//! process can read the run directory or signal playdeck anyway.

use crate::agents::process::RUN_TAG;

/// Why the peer `pid` counts as one of this run's agents (`tag` is the
/// run directory, as agents get it in `PLAYDECK_RUN_DIR`), or `None`.
pub fn agent_of_this_run(pid: i32, tag: &str) -> Option<String> {
    let want = format!("{RUN_TAG}={tag}");
    if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
        && env.split(|&b| b == 0).any(|v| v == want.as_bytes())
    {
        return Some(format!("its environment carries {RUN_TAG} of this run"));
    }
    // Its environment can be emptied (`env -i`), its ancestry cannot:
    // every agent process and what it starts descend from playdeck, which
    // is also the reaper of their orphans.
    let me = std::process::id() as i32;
    let mut p = pid;
    for _ in 0..MAX_DEPTH {
        match parent_of(p) {
            Some(parent) if parent == me => {
                return Some(format!(
                    "it descends from this run's playdeck process (pid {me})"
                ));
            }
            Some(parent) if parent > 1 => p = parent,
            _ => break,
        }
    }
    None
}

/// Who a peer is, as the run records it: `ctl (ana, pid 5678)` for
/// playdeck's own commands (named by their subcommand), else the program's
/// name (`socat (ana, pid 77)`).
pub fn actor_of(pid: i32, uid: u32) -> String {
    let surface = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|c| {
            let mut args = c.split(|&b| b == 0).map(String::from_utf8_lossy);
            let prog = args.next()?;
            let prog = prog.rsplit('/').next().unwrap_or(&prog).to_string();
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

/// Deeper than any process tree an agent makes.
const MAX_DEPTH: usize = 128;

/// The parent pid, from `/proc/<pid>/stat` (`pid (comm) state ppid …`;
/// `comm` may hold spaces and parentheses, so the last `)` ends it).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let why = agent_of_this_run(pid, "/nowhere");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("descends from this run's playdeck process")),
            "{why:?}"
        );
        let parent = parent_of(std::process::id() as i32).unwrap();
        assert_eq!(agent_of_this_run(parent, "/nowhere"), None);
    }

    #[test]
    fn the_run_tag_in_the_environment_is_recognised() {
        let mut child = sleeper(Some((RUN_TAG, "/runs/r1")));
        let pid = child.id() as i32;
        let why = agent_of_this_run(pid, "/runs/r1");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            why.as_deref(),
            Some("its environment carries PLAYDECK_RUN_DIR of this run")
        );
    }
}
