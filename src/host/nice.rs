//! How a watcher of a hosted run (an attached console, an events
//! follower) steps back for the run on this machine's CPUs.

/// How much a watcher (an attached console) steps back for the run on
/// this machine's CPUs: as low as it goes. It still gets all of an idle
/// core, so it keeps up whenever the run waits (on its agents, most of
/// the time), and a key still draws in a few milliseconds (`cargo bench
/// --bench attach`: 1–6 ms while a 100 000-operation run goes).
pub const WATCHER_NICE: i32 = 19;

/// A `ctl RUN events` follower: as low as it goes.
pub const FOLLOWER_NICE: i32 = 19;

/// Lowers this process's priority, and that of its scheduling group: with
/// Linux's autogroups (on by default), nice orders processes only inside
/// one terminal session's group, and a console is in its terminal's, not
/// in the run host's. The group's nice is put back as the console leaves
/// (see [`AutogroupNice`]).
pub fn step_back() -> AutogroupNice {
    if let Err(e) = rustix::process::nice(WATCHER_NICE) {
        tracing::debug!("nice: {e}");
    }
    AutogroupNice::lower(WATCHER_NICE)
}

/// The autogroup nice this process's session had, restored when dropped.
pub struct AutogroupNice(Option<i32>);

const AUTOGROUP: &str = "/proc/self/autogroup";

impl AutogroupNice {
    fn lower(to: i32) -> AutogroupNice {
        // `/autogroup-299 nice 0`
        let was = std::fs::read_to_string(AUTOGROUP)
            .ok()
            .and_then(|s| s.rsplit(' ').next()?.trim().parse::<i32>().ok());
        match was {
            Some(n) if n < to && std::fs::write(AUTOGROUP, to.to_string()).is_ok() => {
                AutogroupNice(Some(n))
            }
            _ => AutogroupNice(None),
        }
    }
}

impl Drop for AutogroupNice {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            // Raising it back needs no privilege only up to where it was
            // set by this session; a failure leaves it lowered, which is
            // harmless.
            let _ = std::fs::write(AUTOGROUP, n.to_string());
        }
    }
}
