//! `playdeck web`: the served page, for a phone or a desktop browser. It
//! lists the user's runs from their runs index, shows what waits on a
//! person across them and a run's lanes and conversations, live, and
//! sends every command through the run's own control socket — the one
//! command definition, with the device recorded as who decided. No run
//! host opens a listener; this one process serves every run of the user.
//!
//! The page reads the operator's view ([`crate::operator`]) as the
//! console does; what it renders is HTML made on the server (maud escapes
//! every interpolation), one script of ours embedded in the binary, and
//! nothing from another origin. Who may connect is decided in
//! [`guard`]; devices and pairing in [`devices`].

pub mod api;
pub mod devices;
pub mod guard;
pub mod pages;
pub mod peer;
pub mod runs;
pub mod stream;
pub mod tls;
pub mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use futures_util::future::BoxFuture;

use crate::control::via::Via;
use crate::control::{Failure, Reply};
use crate::kernel::Request;

/// Sends one command to the run in a directory, for a device.
pub type Commander =
    Arc<dyn Fn(PathBuf, Request, Via) -> BoxFuture<'static, Result<Reply, Failure>> + Send + Sync>;

/// The real one: the run's control socket.
pub fn socket_commander() -> Commander {
    Arc::new(|dir, req, via| {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || crate::control::send_via(&dir, &req, &via))
                .await
                .unwrap_or_else(|e| {
                    Err(Failure::new(
                        crate::control::ErrorCode::Io,
                        format!("the command's task failed: {e}"),
                    ))
                })
        })
    })
}

/// Everything a request may need.
pub struct Web {
    pub store: devices::Store,
    pub watches: watch::Watches,
    /// Host header values this server answers to.
    pub hosts: Vec<String>,
    pub failures: guard::Failures,
    pub commander: Commander,
    /// The runs listed: the user's index (`None`), or these directories.
    pub runs: Option<Vec<PathBuf>>,
    /// Served over TLS: the device cookie is `Secure`, and writes come
    /// from an `https` page.
    pub tls: bool,
}

impl Web {
    pub fn new(store: devices::Store, hosts: Vec<String>) -> Web {
        Web {
            store,
            watches: watch::Watches::default(),
            hosts,
            failures: guard::Failures::default(),
            commander: socket_commander(),
            runs: None,
            tls: false,
        }
    }
}

/// The Host values a server on `addr` answers to: the address itself and,
/// on loopback, `localhost`; plus each of `extra` (a name it is reached
/// by, with or without a port).
pub fn hosts_for(addr: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = addr.port();
    let mut hosts = vec![addr.to_string()];
    if addr.ip().is_loopback() {
        hosts.push(format!("localhost:{port}"));
        hosts.push(format!("127.0.0.1:{port}"));
        hosts.push(format!("[::1]:{port}"));
    }
    for e in extra {
        hosts.push(e.clone());
        if !e.contains(':') {
            hosts.push(format!("{e}:{port}"));
        }
    }
    hosts.dedup();
    hosts
}

/// Every route, behind the guard.
pub fn router(web: Arc<Web>) -> Router {
    Router::new()
        .route("/", get(pages::runs_page))
        .route("/needs", get(pages::needs_page))
        .route("/pair", get(pages::pair_page))
        .route("/runs/{id}", get(pages::run_page))
        .route("/runs/{id}/ops/{op}", get(pages::op_page))
        .route("/runs/{id}/events", get(stream::run_events))
        .route("/runs/{id}/ops/{op}/events", get(stream::op_events))
        .route("/events", get(stream::all_events))
        .route("/api/pair", post(api::pair))
        .route("/api/runs/{id}", post(api::command))
        .route("/api/runs", get(api::runs))
        .route("/assets/app.js", get(pages::script))
        .route("/assets/app.css", get(pages::style))
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn_with_state(
            web.clone(),
            guard::check,
        ))
        .with_state(web)
}

/// Serves `web` on `listener` (over TLS with `tls`) until `stop`
/// resolves.
pub async fn serve(
    web: Arc<Web>,
    listener: tokio::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(web);
    // Not a graceful shutdown: a page's event stream never ends by itself.
    let served = async move {
        match tls {
            Some(cfg) => {
                let l = tls::TlsListener::new(listener, cfg)?;
                axum::serve(l, app.into_make_service_with_connect_info::<guard::Peer>()).await
            }
            None => {
                axum::serve(
                    listener,
                    app.into_make_service_with_connect_info::<guard::Peer>(),
                )
                .await
            }
        }
    };
    tokio::select! {
        r = served => r,
        () = stop => Ok(()),
    }
}
