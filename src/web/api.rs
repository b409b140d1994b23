//! The page's commands: JSON bodies, one a control request as the socket
//! takes it (`{"cmd":"approve","op":"gate-a","on":"gate@12:…"}`), sent to
//! the run for the device that asked and answered with the run's typed
//! answer. A refusal keeps its code, with the HTTP status that says what
//! kind it is: `already_decided` and `stale_decision` 409, an unknown
//! operation 404, a run that is over 410.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::Web;
use super::devices::{Device, Scope};
use super::guard::{COOKIE, Peer, refuse};
use crate::control::ErrorCode;
use crate::control::via::Via;
use crate::kernel::Request;

/// The least scope a command needs.
pub fn scope_of(req: &Request) -> Scope {
    match req {
        Request::Status | Request::Capacity => Scope::Watch,
        Request::Approve { .. }
        | Request::Deny { .. }
        | Request::Permit { .. }
        | Request::Retry { .. }
        | Request::Say { .. }
        | Request::Resolve { .. } => Scope::Decide,
        _ => Scope::Steer,
    }
}

/// The HTTP status a refusal is answered with.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::UnknownOperation | ErrorCode::NoRun | ErrorCode::UnknownInstance => {
            StatusCode::NOT_FOUND
        }
        ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
        ErrorCode::PeerIsAgent | ErrorCode::ReadOnly => StatusCode::FORBIDDEN,
        ErrorCode::NotLive | ErrorCode::RunFinished => StatusCode::GONE,
        ErrorCode::Io => StatusCode::BAD_GATEWAY,
        // The run's state is not what the command needs: already decided,
        // decided on what is no longer shown, not waiting, not paused….
        _ => StatusCode::CONFLICT,
    }
}

fn json(status: StatusCode, v: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// `POST /api/runs/{id}`: one control request.
pub async fn command(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let req: Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "not a control request: {e} (a body is one as `playdeck ctl` sends, e.g. {{\"cmd\":\"approve\",\"op\":\"NAME\",\"on\":\"BASIS\"}})"
                ),
            );
        }
    };
    let need = scope_of(&req);
    if device.scope < need {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "device {:?} may {} only; `{}` needs a device paired with --scope {}",
                device.name,
                device.scope.as_str(),
                req.name(),
                need.as_str()
            ),
        );
    }
    let Some(dir) = web.run_dir(&id) else {
        return refuse(StatusCode::NOT_FOUND, format!("no run {id:?} among yours"));
    };
    let via = Via {
        device: device.name.clone(),
        from: peer.addr.ip(),
    };
    match (web.commander)(dir, req.clone(), via).await {
        Ok(reply) => json(
            StatusCode::OK,
            serde_json::json!({"ok": true, "message": reply.one_line(&req), "reply": reply}),
        ),
        Err(f) => json(
            status_of(f.code),
            serde_json::json!({"ok": false, "error": f}),
        ),
    }
}

#[derive(Deserialize)]
pub struct PairBody {
    code: String,
    #[serde(default)]
    name: Option<String>,
}

/// `POST /api/pair`: a one-time code for a device's cookie.
pub async fn pair(
    State(web): State<Arc<Web>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    body: Bytes,
) -> Response {
    if web.failures.barred(peer.addr.ip()) {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed pairings from this address; wait a minute",
        );
    }
    let Ok(b) = serde_json::from_slice::<PairBody>(&body) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "a pairing is {\"code\": \"…\", \"name\": \"…\"}",
        );
    };
    let store = web.store.clone();
    let paired = tokio::task::spawn_blocking(move || store.pair(&b.code, b.name.as_deref()))
        .await
        .unwrap_or_else(|e| Err(super::devices::PairError::Io(e.to_string())));
    match paired {
        Ok((token, d)) => {
            tracing::info!(
                "web: paired device {:?} ({}) from {}",
                d.name,
                d.scope.as_str(),
                peer.addr
            );
            // Secure over TLS: the browser never sends it over plain HTTP.
            let secure = if web.tls { "; Secure" } else { "" };
            let cookie = format!(
                "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=31536000{secure}"
            );
            let mut r = json(
                StatusCode::OK,
                serde_json::json!({"ok": true, "device": {"id": d.id, "name": d.name, "scope": d.scope}}),
            );
            r.headers_mut().insert(
                header::SET_COOKIE,
                cookie.parse().expect("a cookie of hex is a header value"),
            );
            r
        }
        Err(e) => {
            web.failures.failed(peer.addr.ip());
            refuse(StatusCode::UNAUTHORIZED, e.to_string())
        }
    }
}

/// `GET /api/runs`: the runs listed, as `playdeck runs --json` gives them.
pub async fn runs(State(web): State<Arc<Web>>) -> Response {
    let rows = web.rows().await;
    json(
        StatusCode::OK,
        serde_json::to_value(rows).unwrap_or_default(),
    )
}
