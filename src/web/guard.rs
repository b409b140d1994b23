//! What every request passes before a page or a command: the Host it
//! names (DNS rebinding), who connects (never one of a run's agents),
//! the Origin of every write and its body's type, and the device whose
//! token it carries. Every answer gets the same strict headers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Web;
use super::devices::Device;

/// The cookie a paired browser holds.
pub const COOKIE: &str = "pd_device";

/// Failed logins and pairings one address may make in [`WINDOW`].
const FAILURES: u32 = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// Who is on the other end of a connection, decided once when it was
/// accepted.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// Why it is one of a run's agents, when it is.
    pub agent: Option<String>,
}

impl Peer {
    /// The peer at `addr`, looked up once as its connection is accepted.
    pub fn of(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            agent: super::peer::agent_behind(addr),
        }
    }
}

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for Peer
{
    fn connect_info(s: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Peer {
        Peer::of(*s.remote_addr())
    }
}

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, super::tls::TlsListener>>
    for Peer
{
    fn connect_info(s: axum::serve::IncomingStream<'_, super::tls::TlsListener>) -> Peer {
        Peer::of(*s.remote_addr())
    }
}

/// Failures by address, for the rate limit.
#[derive(Default)]
pub struct Failures(Mutex<HashMap<IpAddr, (Instant, u32)>>);

impl Failures {
    /// Whether `ip` has failed too often lately.
    pub fn barred(&self, ip: IpAddr) -> bool {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&ip)
            .is_some_and(|(since, n)| since.elapsed() < WINDOW && *n >= FAILURES)
    }

    pub fn failed(&self, ip: IpAddr) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(ip).or_insert((Instant::now(), 0));
        if e.0.elapsed() >= WINDOW {
            *e = (Instant::now(), 0);
        }
        e.1 += 1;
        // Bounded: a flood of addresses forgets the oldest.
        if m.len() > 4096 {
            m.retain(|_, (since, _)| since.elapsed() < WINDOW);
        }
    }
}

/// A refusal with words for whoever sees it (a page or a script).
pub fn refuse(status: StatusCode, why: impl Into<String>) -> Response {
    let why = why.into();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({"ok": false, "error": {"code": status.as_u16(), "message": why}})
            .to_string(),
    )
        .into_response()
}

/// The token a request carries: its cookie, else a bearer header.
pub fn token_of(h: &HeaderMap) -> Option<String> {
    let bearer = h
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string());
    let cookie = h
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(COOKIE)?
                .strip_prefix('=')
                .map(str::to_string)
        });
    cookie.or(bearer)
}

/// Paths open without a device: the pairing page and its one command,
/// and the page's own script and style.
fn open_path(path: &str) -> bool {
    path == "/pair" || path == "/api/pair" || path.starts_with("/assets/")
}

pub async fn check(State(web): State<Arc<Web>>, mut req: Request, next: Next) -> Response {
    let mut resp = match decide(&web, &mut req) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal,
    };
    harden(resp.headers_mut());
    resp
}

/// Lets the request through, or says why not.
fn decide(web: &Web, req: &mut Request) -> Result<(), Response> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !web.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            format!(
                "the Host {host:?} is not one this server answers to (allowed: {}); `playdeck web --host NAME` adds one",
                web.hosts.join(", ")
            ),
        ));
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|c| c.0.clone())
        .ok_or_else(|| refuse(StatusCode::FORBIDDEN, "the connection's peer is unknown"))?;
    if let Some(why) = &peer.agent {
        tracing::warn!("web: refused a connection from an agent: {why}");
        return Err(refuse(
            StatusCode::FORBIDDEN,
            format!("refused: {why}; agents may not drive runs through the page"),
        ));
    }
    let writes = !matches!(*req.method(), Method::GET | Method::HEAD);
    if writes {
        let origin = req
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .unwrap_or("");
        let same = origin.split_once("://").is_some_and(|(scheme, rest)| {
            matches!(scheme, "http" | "https") && rest.eq_ignore_ascii_case(host)
        });
        if !same {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                format!(
                    "a write must come from this page (Origin {origin:?} is not http://{host})"
                ),
            ));
        }
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|c| c.to_str().ok())
            .is_some_and(|c| {
                c.split(';')
                    .next()
                    .is_some_and(|t| t.trim() == "application/json")
            });
        if !json {
            return Err(refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a write's body must be JSON (Content-Type: application/json)",
            ));
        }
    }
    if open_path(req.uri().path()) {
        return Ok(());
    }
    if web.failures.barred(peer.addr.ip()) {
        return Err(refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed logins from this address; wait a minute",
        ));
    }
    let device: Option<Device> = token_of(req.headers()).and_then(|t| web.store.device_of(&t));
    match device {
        Some(d) => {
            req.extensions_mut().insert(d);
            Ok(())
        }
        None => {
            web.failures.failed(peer.addr.ip());
            Err(super::pages::not_paired())
        }
    }
}

/// The headers every answer carries: nothing from another origin, no
/// inline script, no framing, nothing cached.
fn harden(h: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        h,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::REFERRER_POLICY, "no-referrer");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, header::CACHE_CONTROL, "no-store");
    }
}
