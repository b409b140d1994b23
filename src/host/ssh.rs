//! A run on another machine, reached over ssh: its address, and the ssh
//! command that runs `playdeck` there (`bridge`, `runs`, `ctl`).

/// An ssh address: `[user@]host[:port]/path#RUN` (the `#RUN` part only
/// for `attach`).
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    pub host: String,
    pub port: Option<u16>,
    pub path: String,
    pub run: Option<String>,
}

pub fn parse_remote(addr: &str) -> Result<Remote, String> {
    let bad = |why: &str| {
        format!("ssh://{addr}: {why}; write ssh://[user@]host[:port]/path/to/project#RUN")
    };
    let (rest, run) = match addr.split_once('#') {
        Some((r, run)) if !run.is_empty() => (r, Some(run.to_string())),
        Some(_) => return Err(bad("the run after # is empty")),
        None => (addr, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "."),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (
            h,
            Some(
                p.parse::<u16>()
                    .map_err(|_| bad(&format!("{p:?} is not a port")))?,
            ),
        ),
        None => (authority, None),
    };
    if host.is_empty() || host.starts_with('-') {
        return Err(bad("no host"));
    }
    // `/~/x` and `/x` as ssh would take them: relative to home, or absolute.
    let path = path
        .strip_prefix("/~/")
        .map_or_else(|| path.to_string(), str::to_string);
    Ok(Remote {
        host: host.to_string(),
        port,
        path,
        run,
    })
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The ssh command that runs `playdeck ARGS` in the remote project:
/// `PLAYDECK_SSH` replaces `ssh` (for options: a key, a config file) and
/// `PLAYDECK_REMOTE_BIN` the remote program's name.
pub fn command(r: &Remote, args: &[&str]) -> tokio::process::Command {
    let ssh = std::env::var("PLAYDECK_SSH").unwrap_or_else(|_| "ssh".into());
    let mut words = ssh.split_whitespace();
    let mut cmd = tokio::process::Command::new(words.next().unwrap_or("ssh"));
    cmd.args(words);
    if let Some(p) = r.port {
        cmd.arg("-p").arg(p.to_string());
    }
    let bin = std::env::var("PLAYDECK_REMOTE_BIN").unwrap_or_else(|_| "playdeck".into());
    let remote = format!(
        "cd {} && exec {} {}",
        quote(&r.path),
        quote(&bin),
        args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    );
    cmd.arg("-T").arg("--").arg(&r.host).arg(remote);
    cmd.kill_on_drop(true);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_addresses_are_read_with_their_parts() {
        let r = parse_remote("ana@build1:2222/srv/proj#latest").unwrap();
        assert_eq!(r.host, "ana@build1");
        assert_eq!(r.port, Some(2222));
        assert_eq!(r.path, "/srv/proj");
        assert_eq!(r.run.as_deref(), Some("latest"));
        let r = parse_remote("build1/~/proj").unwrap();
        assert_eq!((r.port, r.path.as_str(), r.run), (None, "proj", None));
        assert!(parse_remote("host:port/x").is_err());
        assert!(parse_remote("-oProxyCommand=x/y").is_err());
    }
}
