//! Who is on the other end of a loopback connection. Agents run as the
//! operator's user, so an agent holding (or stealing) a device's token
//! could answer its own gate through the page; the control socket refuses
//! agents by their process, and the page does the same: a loopback
//! connection is mapped to the process that holds its socket (the kernel's
//! socket table, then that process's open files), and a process that
//! carries a run's tag in its environment, or descends from one that does
//! or from a run's host, is refused whatever token it shows.
//!
//! What remains: a process of the same user that is none of these (one an
//! agent had started by another service), and a connection through a
//! proxy on this machine (`tailscale serve`, `ssh -L`), whose peer is the
//! proxy: the token is then the only guard. docs/web.md says so.

use std::net::{IpAddr, SocketAddr};

use crate::agents::ancestry::{MAX_DEPTH, stat_of};
use crate::agents::process::RUN_TAG;

/// Why the process behind a connection from `peer` counts as an agent of
/// some run, or `None` when it is none (or the peer is not on this
/// machine). A socket that cannot be found, or whose ancestry cannot be
/// read, counts as an agent's: refused as in doubt.
pub fn agent_behind(peer: SocketAddr) -> Option<String> {
    if !peer.ip().is_loopback() && !is_mapped_loopback(peer.ip()) {
        return None;
    }
    let Some(inode) = socket_inode(peer) else {
        return Some(format!(
            "the connection from {peer} is not in the kernel's socket table; refused as in doubt"
        ));
    };
    // Another user's process holds sockets whose files we cannot read:
    // it is no agent of ours (agents run as this user), and its token is
    // its only way in.
    let pid = holder_of(inode)?;
    agent_process(pid)
}

fn is_mapped_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

/// Why `pid` counts as an agent: it or an ancestor carries a run's tag,
/// or it descends from a live run's host.
pub fn agent_process(pid: i32) -> Option<String> {
    let hosts = run_hosts();
    let mut p = pid;
    for _ in 0..MAX_DEPTH {
        if carries_tag(p) {
            return Some(format!(
                "pid {pid} is one of a run's agent processes ({RUN_TAG} in the environment of pid {p})"
            ));
        }
        if p != pid && hosts.contains(&p) {
            return Some(format!(
                "pid {pid} descends from a run's host (pid {p}): an agent's process"
            ));
        }
        let Some(parent) = stat_of(p).map(|s| s.parent) else {
            return Some(format!(
                "the ancestry of pid {pid} could not be read past pid {p}; refused as in doubt"
            ));
        };
        if parent <= 1 {
            return None;
        }
        p = parent;
    }
    Some(format!(
        "pid {pid} has more than {MAX_DEPTH} ancestors; refused as in doubt"
    ))
}

fn carries_tag(pid: i32) -> bool {
    let want = format!("{RUN_TAG}=");
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        env.split(|&b| b == 0)
            .any(|v| v.starts_with(want.as_bytes()))
    })
}

/// The pids of the user's live run hosts.
fn run_hosts() -> Vec<i32> {
    crate::store::index::all()
        .iter()
        .filter_map(|(_, dir)| crate::store::lock::owner_of(dir))
        .map(|(pid, _)| pid as i32)
        .collect()
}

/// The inode of the socket whose local end is `peer`, from
/// `/proc/net/tcp` or `tcp6` (`sl local rem st … uid timeout inode`).
fn socket_inode(peer: SocketAddr) -> Option<u64> {
    let (file, want) = match peer.ip() {
        IpAddr::V4(v4) => (
            "/proc/net/tcp",
            format!(
                "{:08X}:{:04X}",
                u32::from_ne_bytes(v4.octets()),
                peer.port()
            ),
        ),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            let words: String = o
                .chunks(4)
                .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            ("/proc/net/tcp6", format!("{words}:{:04X}", peer.port()))
        }
    };
    let table = std::fs::read_to_string(file).ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&want.as_str()))
            .then(|| f.get(9)?.parse().ok())
            .flatten()
    })
}

/// The process holding the socket `inode` open, of those whose open
/// files this user may read.
fn holder_of(inode: u64) -> Option<i32> {
    let want = format!("socket:[{inode}]");
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let fds = std::fs::read_dir(e.path().join("fd")).ok()?;
            fds.filter_map(Result::ok)
                .any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str())
                })
                .then_some(pid)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `agent_behind` says of a connection from a bash that
    /// carries the run tag `tag` (none: no tag in its environment).
    fn verdict_on(tag: Option<&str>) -> Option<String> {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut bash = std::process::Command::new("bash");
        bash.arg("-c")
            .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port}; sleep 5"));
        match tag {
            Some(t) => bash.env(RUN_TAG, t),
            None => bash.env_remove(RUN_TAG),
        };
        let mut child = bash.spawn().unwrap();
        let (_s, peer) = l.accept().unwrap();
        let why = agent_behind(peer);
        child.kill().unwrap();
        child.wait().unwrap();
        why
    }

    #[test]
    fn a_loopback_connection_is_traced_to_its_process() {
        // A child with the run tag connects: it is an agent's.
        let why = verdict_on(Some("/tmp/some-run")).expect("an agent's connection");
        assert!(why.contains(RUN_TAG), "{why}");
        // One without it is a person's.
        assert_eq!(verdict_on(None), None);
    }
}
