//! `playdeck web`: serve the page; `web pair`, `web devices`, `web revoke`.

use std::sync::Arc;

use playdeck::web::devices::Store;

use super::{CmdError, Outcome, block_on, stop_requests};
use crate::cli::{WebAction, WebArgs};

/// Where a running server says it is, for `web pair`.
const SERVER_FILE: &str = "server.json";

pub fn web(args: WebArgs) -> Outcome {
    // Pairing and unpairing are the operator's: an agent (running as the
    // same user) is refused here as the control socket refuses it.
    if args.action.is_some()
        && let Some(why) = playdeck::web::peer::agent_process(std::process::id() as i32)
    {
        return Err(CmdError::Failed(format!(
            "web: refused: {why}; agents may not pair or unpair devices"
        )));
    }
    let store = Store::mine().map_err(|e| CmdError::Failed(format!("web: {e}")))?;
    match args.action {
        None => {
            let tls = match (&args.tls_cert, &args.tls_key) {
                (Some(c), Some(k)) => Some(
                    playdeck::web::tls::config(c, k)
                        .map_err(|e| CmdError::Input(format!("web: {e}")))?,
                ),
                _ => None,
            };
            serve(store, args.listen, args.hosts, tls)
        }
        Some(WebAction::Pair { scope, name }) => pair(&store, scope, name),
        Some(WebAction::Devices { json }) => devices(&store, json),
        Some(WebAction::Revoke { device }) => {
            let gone = store
                .revoke(&device)
                .map_err(|e| CmdError::Input(format!("web revoke: {e}")))?;
            for d in gone {
                sayln!(
                    "revoked {} ({}); its open pages stop within a second",
                    d.name,
                    d.id
                );
            }
            Ok(0)
        }
    }
}

fn serve(
    store: Store,
    listen: std::net::SocketAddr,
    hosts: Vec<String>,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ServerConfig>>,
) -> Outcome {
    super::worker::log_to_stderr();
    store.sweep();
    if !listen.ip().is_loopback() && tls.is_none() {
        warnln!(
            "web: warning: listening on {listen} without TLS: anyone on that network sees the page and its cookies in the clear; give --tls-cert and --tls-key, or keep the loopback default behind `ssh -L` or `tailscale serve` (docs/web.md)"
        );
    }
    block_on(true, async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| CmdError::Failed(format!("web: cannot listen on {listen}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| CmdError::Failed(format!("web: {e}")))?;
        let url = format!("{}://{addr}", if tls.is_some() { "https" } else { "http" });
        let file = store.dir().join(SERVER_FILE);
        let text = serde_json::json!({"url": url, "pid": std::process::id()}).to_string();
        playdeck::files::write_atomic(&file, text.as_bytes())
            .map_err(|e| CmdError::Failed(format!("web: {}: {e}", file.display())))?;
        let hosts = playdeck::web::hosts_for(addr, &hosts);
        let mut web = playdeck::web::Web::new(store, hosts);
        web.tls = tls.is_some();
        let web = Arc::new(web);
        sayln!("playdeck web: serving {url} (pair a device: playdeck web pair)");
        let mut stop = stop_requests();
        let served = playdeck::web::serve(web, listener, tls, async move {
            let _ = stop.recv().await;
        })
        .await;
        let _ = std::fs::remove_file(&file);
        served.map_err(|e| CmdError::Failed(format!("web: {e}")))?;
        Ok(0)
    })?
}

fn pair(store: &Store, scope: playdeck::web::devices::Scope, name: Option<String>) -> Outcome {
    let code = store
        .new_code(scope, name)
        .map_err(|e| CmdError::Input(format!("web pair: {e}")))?;
    let url = std::fs::read(store.dir().join(SERVER_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("url")?.as_str().map(str::to_string));
    let Some(url) = url else {
        sayln!(
            "no `playdeck web` is serving; start it, then open /pair?code={code} on it (the code is good for {} s)",
            playdeck::web::devices::PAIRING_SECS
        );
        return Ok(0);
    };
    let link = format!("{url}/pair?code={code}");
    if let Ok(qr) = qrcode::QrCode::new(link.as_bytes()) {
        let art = qr
            .render::<qrcode::render::unicode::Dense1x2>()
            .quiet_zone(true)
            .build();
        sayln!("{art}");
    }
    sayln!(
        "open {link} on the device to pair it ({}; good once, for {} s)",
        scope.as_str(),
        playdeck::web::devices::PAIRING_SECS
    );
    Ok(0)
}

fn devices(store: &Store, json: bool) -> Outcome {
    let ds = store
        .devices()
        .map_err(|e| CmdError::Failed(format!("web devices: {e}")))?;
    if json {
        let v: Vec<_> = ds
            .iter()
            .map(|d| serde_json::json!({"id": d.id, "name": d.name, "scope": d.scope, "paired_at": d.paired_at}))
            .collect();
        sayln!("{}", serde_json::Value::Array(v));
        return Ok(0);
    }
    if ds.is_empty() {
        sayln!("no paired devices (`playdeck web pair` pairs one)");
    }
    for d in ds {
        sayln!(
            "{}  {:<7} {}  paired {}",
            d.id,
            d.scope.as_str(),
            d.name,
            playdeck::control::listing::when(d.paired_at)
        );
    }
    Ok(0)
}
