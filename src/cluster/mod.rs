//! Scale-out through NATS JetStream (`[cluster]`, `playdeck worker`): a
//! run keeps its kernel, event log and consoles where it started; each
//! agent invocation becomes a job on a work-queue stream that any worker
//! serving the play takes, performs and reports back. See `wire` for what
//! travels and `docs/scale-out.md` for deploying workers.

pub mod hub;
pub mod roster;
pub mod wire;

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use tokio::sync::watch;

/// A connection to the cluster: the client, whether it is up right now,
/// and the key that signs and checks what travels.
pub struct Connection {
    pub client: async_nats::Client,
    pub connected: watch::Receiver<bool>,
    pub signer: wire::Signer,
}

/// Connects to `url` (a first failure, such as refused credentials, is
/// an error at once), then reconnects for ever; `connected` says whether the
/// connection is up right now (a run does not count a worker lost for
/// silence while it is itself cut off).
pub async fn connect(url: &str, name: &str) -> Result<Connection, String> {
    let (tx, rx) = watch::channel(false);
    let tx = std::sync::Arc::new(tx);
    let events = tx.clone();
    let (options, signer) = match credentials_file() {
        Some(path) => credentials(&path)?,
        None => return Err(no_credentials()),
    };
    let client = options
        .name(name)
        .event_callback(move |e| {
            let events = events.clone();
            async move {
                match e {
                    async_nats::Event::Connected => {
                        events.send_replace(true);
                    }
                    async_nats::Event::Disconnected => {
                        events.send_replace(false);
                    }
                    _ => {}
                }
            }
        })
        .connect(url)
        .await
        .map_err(|e| e.to_string())?;
    tx.send_replace(client.connection_state() == async_nats::connection::State::Connected);
    Ok(Connection {
        client,
        connected: rx,
        signer,
    })
}

/// The two work-queue streams, made by whoever comes first.
pub async fn ensure_streams(js: &jetstream::Context) -> Result<(), async_nats::Error> {
    js.get_or_create_stream(stream::Config {
        name: wire::JOBS_STREAM.into(),
        subjects: vec!["pd.job.>".into()],
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await?;
    js.get_or_create_stream(stream::Config {
        name: wire::OUT_STREAM.into(),
        subjects: vec!["pd.out.>".into()],
        retention: stream::RetentionPolicy::WorkQueue,
        // Frames of a run nobody reads any more do not stay for ever.
        max_age: Duration::from_secs(24 * 3600),
        ..Default::default()
    })
    .await?;
    Ok(())
}

/// Where workers say they are alive: a row each, gone a minute after the
/// last heartbeat.
pub async fn workers_bucket(js: &jetstream::Context) -> Result<kv::Store, async_nats::Error> {
    Ok(js
        .create_or_update_key_value(kv::Config {
            bucket: wire::WORKERS_BUCKET.into(),
            history: 1,
            max_age: Duration::from_secs(60),
            ..Default::default()
        })
        .await?)
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The hub of a run of a `[cluster]` play: connected, its streams there.
/// A server that cannot be reached at the start is an error, said at once
/// (later outages are waited out).
pub async fn hub_for(
    url: &str,
    settings: hub::HubSettings,
    tails: std::sync::Arc<crate::agents::Tails>,
) -> Result<std::sync::Arc<hub::Hub>, String> {
    let name = format!("playdeck run {}", settings.run_id);
    let c = tokio::time::timeout(FIRST_CONNECT, connect(url, &name))
        .await
        .map_err(|_| {
            format!(
                "NATS server {url}: no answer in {} s",
                FIRST_CONNECT.as_secs()
            )
        })?
        .map_err(|e| format!("NATS server {url}: {e}"))?;

    hub::Hub::start(c, settings, tails)
        .await
        .map_err(|e| format!("NATS server {url}: JetStream: {e} (the server needs -js)"))
}

/// How long the first connection may take.
pub const FIRST_CONNECT: Duration = Duration::from_secs(10);

/// Every agent of `local` (the built-ins included), performed remotely.
pub fn remote_registry(
    local: &crate::agents::AgentRegistry,
    hub: &std::sync::Arc<hub::Hub>,
) -> crate::agents::AgentRegistry {
    use crate::kernel::AgentResolver;
    let mut r = crate::agents::AgentRegistry::default();
    for name in local.names() {
        let wants_context = local.resolve(name).is_some_and(|a| a.wants_context());
        r.insert(
            name,
            std::sync::Arc::new(hub::RemoteAgent {
                hub: hub.clone(),
                agent: name.to_string(),
                wants_context,
            }),
        );
    }
    r
}

/// Where NATS credentials are read from: `PLAYDECK_NATS_CREDS`, else
/// `nats.toml` in playdeck's config directory when it exists. Never the
/// command line (other users read it in `ps`) and never the log.
pub fn credentials_file() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("PLAYDECK_NATS_CREDS") {
        return Some(p.into());
    }
    crate::paths::config_dir()
        .map(|d| d.join("nats.toml"))
        .filter(|p| p.is_file())
}

const CREDENTIAL_KEYS: &[&str] = &[
    "user",
    "password",
    "nkey_seed_file",
    "ca_file",
    "tls",
    "signing_key_file",
    "unsigned",
];

/// How to make a key, in a message.
const MAKE_KEY: &str = "head -c 32 /dev/urandom | base64 > pd.key; chmod 600 pd.key";

/// Without a credentials file there is no key: said with how to make both.
fn no_credentials() -> String {
    let file = crate::paths::config_dir().map_or_else(
        || "nats.toml in playdeck's config directory".to_string(),
        |d| d.join("nats.toml").display().to_string(),
    );
    format!(
        "jobs on NATS must be signed, and there is no credentials file (PLAYDECK_NATS_CREDS, or {file}); make a key beside it ({MAKE_KEY}) and write signing_key_file = \"pd.key\" in it, for the run and its workers alike; on a bus only you can publish on, unsigned = true runs unsigned (docs/scale-out.md, Credentials)"
    )
}

/// Connection options from a credentials file:
/// `user` + `password`, or `nkey_seed_file`; `ca_file` (a PEM root to
/// trust) and `tls = true` (require TLS) for either; `signing_key_file`,
/// the key the run and its workers sign what they send with. Errors name
/// the file and the key, never a secret.
pub fn credentials(
    path: &std::path::Path,
) -> Result<(async_nats::ConnectOptions, wire::Signer), String> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("NATS credentials {shown}: {e}"))?;
    let t: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("NATS credentials {shown}: {}", e.message()))?;
    for k in t.keys() {
        if !CREDENTIAL_KEYS.contains(&k.as_str()) {
            return Err(format!(
                "NATS credentials {shown}: unknown key {k:?}; allowed: {}",
                CREDENTIAL_KEYS.join(", ")
            ));
        }
    }
    let string = |k: &str| -> Result<Option<String>, String> {
        match t.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("NATS credentials {shown}: {k} must be a string")),
        }
    };
    let mut o = match (
        string("user")?,
        string("password")?,
        string("nkey_seed_file")?,
    ) {
        (Some(u), Some(p), None) => async_nats::ConnectOptions::with_user_and_password(u, p),
        (None, None, Some(seed)) => {
            let seed_path = path
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join(seed);
            let seed = std::fs::read_to_string(&seed_path).map_err(|e| {
                format!(
                    "NATS credentials {shown}: nkey_seed_file {}: {e}",
                    seed_path.display()
                )
            })?;
            async_nats::ConnectOptions::with_nkey(seed.trim().to_string())
        }
        (None, None, None) => async_nats::ConnectOptions::new(),
        _ => {
            return Err(format!(
                "NATS credentials {shown}: give user and password together, or nkey_seed_file alone"
            ));
        }
    };
    if let Some(ca) = string("ca_file")? {
        let ca = path.parent().unwrap_or(std::path::Path::new(".")).join(ca);
        o = o.add_root_certificates(ca);
    }
    match t.get("tls") {
        None => {}
        Some(toml::Value::Boolean(b)) => o = o.require_tls(*b),
        Some(_) => {
            return Err(format!(
                "NATS credentials {shown}: tls must be true or false"
            ));
        }
    }
    let unsigned = match t.get("unsigned") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => {
            return Err(format!(
                "NATS credentials {shown}: unsigned must be true or false"
            ));
        }
    };
    let signer = match string("signing_key_file")? {
        None if unsigned => wire::Signer::default(),
        None => {
            return Err(format!(
                "NATS credentials {shown}: no signing_key_file: jobs on NATS must be signed, or anyone who may publish on pd.job.> has the workers run what they write; make a key beside it ({MAKE_KEY}) and write signing_key_file = \"pd.key\", for the run and its workers alike; on a bus only you can publish on, unsigned = true runs unsigned"
            ));
        }
        Some(_) if unsigned => {
            return Err(format!(
                "NATS credentials {shown}: signing_key_file and unsigned = true say opposite things; keep one"
            ));
        }
        Some(f) => {
            let key_path = path.parent().unwrap_or(std::path::Path::new(".")).join(f);
            wire::Signer::new(&signing_key(&key_path).map_err(|e| {
                format!(
                    "NATS credentials {shown}: signing_key_file {}: {e}",
                    key_path.display()
                )
            })?)
        }
    };
    Ok((o, signer))
}

/// The secret in a signing key file: its bytes, surrounding whitespace
/// trimmed; at least [`wire::MIN_KEY_BYTES`], and readable by its owner
/// alone (anyone who reads it can forge jobs).
fn signing_key(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "others can read it (mode {:o}); make it the owner's alone: chmod 600",
            mode & 0o777
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let key = bytes.trim_ascii().to_vec();
    if key.len() < wire::MIN_KEY_BYTES {
        return Err(format!(
            "{} bytes; at least {} (make one: {MAKE_KEY})",
            key.len(),
            wire::MIN_KEY_BYTES
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_signing_key_is_long_enough_and_its_owner_s_alone() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("nats.toml");
        std::fs::write(&creds, "signing_key_file = \"pd.key\"\n").unwrap();
        let key = dir.path().join("pd.key");
        let set = |text: &str, mode: u32| {
            std::fs::write(&key, text).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let err = |r: Result<(async_nats::ConnectOptions, wire::Signer), String>| match r {
            Ok(_) => panic!("taken"),
            Err(e) => e,
        };
        set(&"k".repeat(40), 0o644);
        let e = err(credentials(&creds));
        assert!(
            e.contains("signing_key_file") && e.contains("others can read it (mode 644)"),
            "{e}"
        );
        set("short\n", 0o600);
        let e = err(credentials(&creds));
        assert!(e.contains("5 bytes; at least 32"), "{e}");
        assert!(!e.contains("short"), "never the secret: {e}");
        set(&format!("{}\n", "k".repeat(40)), 0o600);
        let (_, signer) = credentials(&creds).unwrap();
        assert!(signer.signs());
        // No key: refused, unless unsigned is said outright.
        std::fs::write(&creds, "user = \"a\"\npassword = \"b\"\n").unwrap();
        let e = err(credentials(&creds));
        assert!(
            e.contains("no signing_key_file: jobs on NATS must be signed"),
            "{e}"
        );
        std::fs::write(&creds, "unsigned = true\n").unwrap();
        let (_, signer) = credentials(&creds).unwrap();
        assert!(!signer.signs());
        std::fs::write(&creds, "unsigned = true\nsigning_key_file = \"pd.key\"\n").unwrap();
        assert!(err(credentials(&creds)).contains("say opposite things"));
    }
}
