//! Whose process is this: the ancestry of a pid, read from `/proc`. The
//! control socket refuses a peer that descends from the run's playdeck;
//! an attempt's question socket takes questions only from processes that
//! descend from that attempt's agent. Both hold because playdeck is its
//! agents' subreaper: an orphan is given to it, never to pid 1, so no
//! agent process can leave its ancestry by forking away.

/// Deeper than any chain of shells a person's own command comes through
/// (terminal, multiplexer, ssh, shells); a deeper peer is in doubt.
pub const MAX_DEPTH: usize = 512;

/// `/proc/<pid>/stat`'s start times count in clock ticks: a process that
/// started in the same tick as the accept is not taken for a later one.
pub const START_SLACK: f64 = 0.05;

/// The machine's uptime now, in seconds (what `/proc/<pid>/stat`'s start
/// times are counted from): taken when a connection is accepted.
pub fn uptime_now() -> Option<f64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Some(t.tv_sec as f64 + t.tv_nsec as f64 / 1e9)
}

/// Whether `pid` descends from `root`: `Ok(true)` when it does,
/// `Ok(false)` when its ancestry reaches the top (pid 1, or a parent
/// outside this pid namespace) without passing `root`, and `Err(why)`
/// when the walk could not finish within `max` steps or lost a parent
/// it could not read.
pub fn descends_from(pid: i32, root: i32, max: usize) -> Result<bool, String> {
    let mut p = pid;
    for _ in 0..max {
        let Some(parent) = stat_of(p).map(|s| s.parent) else {
            return Err(format!(
                "the ancestry of pid {pid} could not be read past pid {p}; refused as in doubt"
            ));
        };
        if parent == root {
            return Ok(true);
        }
        if parent <= 1 {
            return Ok(false);
        }
        if stat_of(parent).is_none() {
            // The parent exited while we looked: `p` has been given to a
            // reaper since; read its parent again.
            match stat_of(p).map(|s| s.parent) {
                Some(again) if again != parent => continue,
                _ => {
                    return Err(format!(
                        "the ancestry of pid {pid} could not be read past pid {p}; refused as in doubt"
                    ));
                }
            }
        }
        p = parent;
    }
    Err(format!(
        "pid {pid} has more than {max} ancestors, deeper than any shell a person uses; refused as in doubt"
    ))
}

/// A process's parent and start time (uptime seconds).
pub struct Stat {
    pub parent: i32,
    pub started: f64,
}

/// From `/proc/<pid>/stat` (`pid (comm) state ppid … starttime …`; `comm`
/// may hold spaces and parentheses, so the last `)` ends it; starttime is
/// field 22, in clock ticks since boot).
pub fn stat_of(pid: i32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the comm: state is field 3, so field N is fields[N - 3].
    let parent = fields.get(1)?.parse().ok()?;
    let ticks: u64 = fields.get(19)?.parse().ok()?;
    let hz = rustix::param::clock_ticks_per_second() as f64;
    Some(Stat {
        parent,
        started: ticks as f64 / hz,
    })
}

/// `look` at the process `pid`, which connected no later than `accepted`
/// (uptime seconds): `None` when it is gone, or its pid names a process
/// started since (reused) or changed while it was looked at — what was
/// read is then not of the process that connected.
pub fn while_the_same<R>(pid: i32, accepted: Option<f64>, look: impl FnOnce() -> R) -> Option<R> {
    let first = stat_of(pid)?;
    if accepted.is_some_and(|at| first.started > at + START_SLACK) {
        return None;
    }
    let seen = look();
    match stat_of(pid) {
        Some(again) if again.started == first.started => Some(seen),
        _ => None,
    }
}
