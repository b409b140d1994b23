//! Where the user's files live.

use std::path::PathBuf;

/// `$PLAYDECK_CONFIG_DIR`, else `$XDG_CONFIG_HOME/playdeck`, else
/// `~/.config/playdeck`: the console config, themes and the agents file.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PLAYDECK_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("playdeck"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("playdeck"))
}

/// The login name of `uid` from `/etc/passwd`, else `uid N`: who took an
/// action, as the run records it.
pub fn user_name(uid: u32) -> String {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines().find_map(|l| {
                let mut f = l.split(':');
                let name = f.next()?;
                let id: u32 = f.nth(1)?.parse().ok()?;
                (id == uid && !name.is_empty()).then(|| name.to_string())
            })
        })
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// How a run names who asked for a command: the surface, the user and the
/// process (`ctl (ana, pid 5678)`, `console (ana, pid 1234)`).
pub fn actor(surface: &str, uid: u32, pid: u32) -> String {
    format!("{surface} ({}, pid {pid})", user_name(uid))
}

/// This process as an actor.
pub fn me(surface: &str) -> String {
    actor(
        surface,
        rustix::process::getuid().as_raw(),
        std::process::id(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_is_named_and_an_unknown_uid_is_a_number() {
        assert_eq!(super::user_name(0), "root");
        assert_eq!(super::user_name(4_000_000_001), "uid 4000000001");
    }
}
