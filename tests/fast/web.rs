//! The served page, every route called in process (no socket, no
//! browser): who may connect, pairing, scopes, commands mapped to the
//! control protocol with its typed answers, server-sent events resumed
//! without a gap, revocation ending streams, and an agent's words inert.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request as HttpRequest, StatusCode, header};
use http_body_util::BodyExt;
use playdeck::control::via::Via;
use playdeck::control::{ErrorCode, Failure, Reply};
use playdeck::kernel::{Answer, Request};
use playdeck::web::devices::{Scope, Store};
use playdeck::web::guard::Peer;
use playdeck::web::{Commander, Web, hosts_for, router};
use tower::ServiceExt;

const ADDR: &str = "127.0.0.1:7420";
const HOST: &str = "127.0.0.1:7420";

/// A run's directory as the demo leaves it at 40 s (gates and an
/// escalation waiting), copied out of the scene before it ends.
async fn demo_run(into: &Path) -> PathBuf {
    run_of(
        &playdeck::play::Play::demo(),
        40.0,
        into,
        "20261206-120000-demo",
    )
    .await
}

/// A run's directory as `play` leaves it at `at` seconds, named `name`.
async fn run_of(play: &playdeck::play::Play, at: f64, into: &Path, name: &str) -> PathBuf {
    let scene = playdeck::console::screenshot::Scene::at(play, at, 120, 36, None)
        .await
        .unwrap();
    let from = scene.session.run_dir.path.clone();
    let dir = into.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["events.jsonl", "play.toml"] {
        std::fs::copy(from.join(f), dir.join(f)).unwrap();
    }
    scene.finish().await;
    dir
}

type Sent = Arc<Mutex<Vec<(PathBuf, Request, Via)>>>;

/// A commander that records what it is given and answers `answer`.
fn recording(answer: Result<Reply, Failure>) -> (Commander, Sent) {
    let sent: Sent = Arc::default();
    let s = sent.clone();
    let c: Commander = Arc::new(move |dir, req, via| {
        s.lock().unwrap().push((dir, req, via));
        let a = answer.clone();
        Box::pin(async move { a })
    });
    (c, sent)
}

struct Fixture {
    _t: tempfile::TempDir,
    web: Arc<Web>,
    run: PathBuf,
    sent: Sent,
}

async fn fixture(answer: Result<Reply, Failure>) -> Fixture {
    let t = tempfile::tempdir().unwrap();
    let run = demo_run(t.path()).await;
    let store = Store::at(&t.path().join("web")).unwrap();
    let (commander, sent) = recording(answer);
    let mut web = Web::new(store, hosts_for(ADDR.parse().unwrap(), &[]));
    web.commander = commander;
    web.runs = Some(vec![run.clone()]);
    Fixture {
        _t: t,
        web: Arc::new(web),
        run,
        sent,
    }
}

impl Fixture {
    fn device(&self, scope: Scope, name: &str) -> String {
        let code = self.web.store.new_code(scope, Some(name.into())).unwrap();
        self.web.store.pair(&code, None).unwrap().0
    }

    fn id(&self) -> String {
        self.run.file_name().unwrap().to_string_lossy().into_owned()
    }
}

fn peer(agent: Option<&str>) -> ConnectInfo<Peer> {
    ConnectInfo(Peer {
        addr: "127.0.0.1:50000".parse::<SocketAddr>().unwrap(),
        agent: agent.map(str::to_string),
    })
}

fn get(path: &str, token: Option<&str>) -> HttpRequest<Body> {
    let mut b = HttpRequest::get(path).header(header::HOST, HOST);
    if let Some(t) = token {
        b = b.header(header::COOKIE, format!("pd_device={t}"));
    }
    let mut r = b.body(Body::empty()).unwrap();
    r.extensions_mut().insert(peer(None));
    r
}

fn post(path: &str, token: Option<&str>, body: &str) -> HttpRequest<Body> {
    let mut b = HttpRequest::post(path)
        .header(header::HOST, HOST)
        .header(header::ORIGIN, format!("http://{HOST}"))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(t) = token {
        b = b.header(header::COOKIE, format!("pd_device={t}"));
    }
    let mut r = b.body(Body::from(body.to_string())).unwrap();
    r.extensions_mut().insert(peer(None));
    r
}

async fn call(
    web: &Arc<Web>,
    req: HttpRequest<Body>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let r = router(web.clone()).oneshot(req).await.unwrap();
    let (parts, body) = r.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

#[tokio::test(start_paused = true)]
async fn nobody_unpaired_foreign_or_an_agent_gets_in() {
    let f = fixture(Ok(Reply::Done(Answer::Done))).await;
    let token = f.device(Scope::Steer, "pixel-7");
    let (s, h, body) = call(&f.web, get("/", None)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("playdeck web pair"));
    assert!(
        h[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'"),
        "every answer carries the policy"
    );
    let (s, _, body) = call(&f.web, get("/", Some(&token))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(body.contains(&format!("/runs/{}", f.id())), "{body}");
    // DNS rebinding: a name this server was not told it is reached by.
    let mut r = get("/", Some(&token));
    r.headers_mut()
        .insert(header::HOST, "evil.example:7420".parse().unwrap());
    let (s, _, body) = call(&f.web, r).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    // One of a run's agents, token or not.
    let mut r = get("/", Some(&token));
    r.extensions_mut()
        .insert(peer(Some("pid 9 carries PLAYDECK_RUN_DIR")));
    let (s, _, body) = call(&f.web, r).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(body.contains("agents may not drive runs"), "{body}");
    // A token that is not one; the script and style are open.
    let (s, _, _) = call(&f.web, get("/", Some(&"0".repeat(64)))).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, h, _) = call(&f.web, get("/assets/app.js", None)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _, _) = call(&f.web, get("/assets/nothing.js", None)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "an open path that is nothing");
    assert!(
        h[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_comes_from_the_page_as_json() {
    let f = fixture(Ok(Reply::Done(Answer::Done))).await;
    let token = f.device(Scope::Steer, "pixel-7");
    let path = format!("/api/runs/{}", f.id());
    let mut r = post(&path, Some(&token), r#"{"cmd":"pause"}"#);
    r.headers_mut()
        .insert(header::ORIGIN, "http://evil.example".parse().unwrap());
    assert_eq!(call(&f.web, r).await.0, StatusCode::FORBIDDEN);
    let mut r = post(&path, Some(&token), r#"{"cmd":"pause"}"#);
    r.headers_mut().remove(header::ORIGIN);
    assert_eq!(call(&f.web, r).await.0, StatusCode::FORBIDDEN);
    let mut r = post(&path, Some(&token), "cmd=pause");
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        "application/x-www-form-urlencoded".parse().unwrap(),
    );
    assert_eq!(call(&f.web, r).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (s, h, _) = call(&f.web, post(&path, Some(&token), r#"{"cmd":"pause"}"#)).await;
    assert_eq!(s, StatusCode::OK);
    assert!(!h.contains_key("access-control-allow-origin"), "no CORS");
    assert!(
        f.sent.lock().unwrap().len() == 1,
        "nothing refused was sent"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pairing_code_pairs_once_and_guessing_is_barred() {
    let f = fixture(Ok(Reply::Done(Answer::Done))).await;
    let code = f.web.store.new_code(Scope::Decide, None).unwrap();
    let body = format!(r#"{{"code":"{code}","name":"pixel-7"}}"#);
    let (s, h, answer) = call(&f.web, post("/api/pair", None, &body)).await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    let cookie = h[header::SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let token = cookie
        .strip_prefix("pd_device=")
        .and_then(|c| c.split(';').next())
        .unwrap();
    assert_eq!(call(&f.web, get("/", Some(token))).await.0, StatusCode::OK);
    let (s, _, answer) = call(&f.web, post("/api/pair", None, &body)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(answer.contains("used already"), "{answer}");
    // Guessing: ten wrong codes, then the address is barred a while,
    // even with the right one.
    for _ in 0..9 {
        let wrong = format!(r#"{{"code":"{}"}}"#, "a".repeat(32));
        call(&f.web, post("/api/pair", None, &wrong)).await;
    }
    let good = f.web.store.new_code(Scope::Decide, None).unwrap();
    let (s, _, _) = call(
        &f.web,
        post("/api/pair", None, &format!(r#"{{"code":"{good}"}}"#)),
    )
    .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(start_paused = true)]
async fn each_scope_may_do_what_it_names_only() {
    let f = fixture(Ok(Reply::Done(Answer::Done))).await;
    let watch = f.device(Scope::Watch, "tv");
    let decide = f.device(Scope::Decide, "phone");
    let steer = f.device(Scope::Steer, "laptop");
    let path = format!("/api/runs/{}", f.id());
    let approve = r#"{"cmd":"approve","op":"deploy-prod"}"#;
    let cancel = r#"{"cmd":"cancel"}"#;
    let (s, _, body) = call(&f.web, post(&path, Some(&watch), approve)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(body.contains("--scope decide"), "{body}");
    assert_eq!(
        call(&f.web, post(&path, Some(&decide), approve)).await.0,
        StatusCode::OK
    );
    let (s, _, body) = call(&f.web, post(&path, Some(&decide), cancel)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(body.contains("--scope steer"), "{body}");
    assert_eq!(
        call(&f.web, post(&path, Some(&steer), cancel)).await.0,
        StatusCode::OK
    );
    let sent = f.sent.lock().unwrap().len();
    assert_eq!(sent, 2, "only what was allowed reached the run");
    // The page never shows a watcher a button.
    let (_, _, page) = call(&f.web, get(&format!("/runs/{}", f.id()), Some(&watch))).await;
    assert!(!page.contains("data-cmd"), "a watch device sees no command");
    assert!(page.contains("watches only"));
}

#[tokio::test(start_paused = true)]
async fn a_command_is_the_control_request_with_its_basis_and_device() {
    let f = fixture(Err(Failure::new(
        ErrorCode::AlreadyDecided,
        "deploy-prod was approved already (by console (ana, pid 1))",
    )))
    .await;
    let token = f.device(Scope::Decide, "pixel-7");
    let path = format!("/api/runs/{}", f.id());
    let body = r#"{"cmd":"approve","op":"deploy-prod","on":"gate@57:abc"}"#;
    let (s, _, answer) = call(&f.web, post(&path, Some(&token), body)).await;
    assert_eq!(s, StatusCode::CONFLICT, "{answer}");
    assert!(answer.contains("already_decided"), "{answer}");
    let sent = f.sent.lock().unwrap().clone();
    let (dir, req, via) = &sent[0];
    assert_eq!(dir, &f.run);
    assert_eq!(
        serde_json::to_value(req).unwrap(),
        serde_json::json!({"cmd": "approve", "op": "deploy-prod", "on": "gate@57:abc"})
    );
    assert_eq!(via.device, "pixel-7");
    assert_eq!(via.from.to_string(), "127.0.0.1");
    // Each refusal keeps its code, under the status that says its kind.
    for (code, status) in [
        (ErrorCode::UnknownOperation, StatusCode::NOT_FOUND),
        (ErrorCode::StaleDecision, StatusCode::CONFLICT),
        (ErrorCode::NotLive, StatusCode::GONE),
        (ErrorCode::BadRequest, StatusCode::BAD_REQUEST),
    ] {
        assert_eq!(playdeck::web::api::status_of(code), status);
    }
    // Not a control request: said, nothing sent.
    let (s, _, answer) = call(&f.web, post(&path, Some(&token), r#"{"cmd":"launch"}"#)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(answer.contains("not a control request"), "{answer}");
    // A run that is not among the user's is no run.
    let (s, _, _) = call(&f.web, post("/api/runs/..%2F..%2Fetc", Some(&token), body)).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(f.sent.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_page_shows_what_waits_with_its_basis() {
    let f = fixture(Ok(Reply::Done(Answer::Done))).await;
    let token = f.device(Scope::Decide, "pixel-7");
    // Across runs, only what a live run waits for (this copy is not live).
    let (s, _, page) = call(&f.web, get("/needs", Some(&token))).await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains("Nothing waits on you"), "{page}");
    // A run's own page: every card carries the basis its decision is
    // bound to.
    let (s, _, run) = call(&f.web, get(&format!("/runs/{}", f.id()), Some(&token))).await;
    assert_eq!(s, StatusCode::OK);
    let cards = run.matches("<article").count();
    assert!(cards >= 1, "{run}");
    assert_eq!(run.matches("data-basis=\"").count(), cards, "{run}");
    assert!(run.contains("Approve") || run.contains("Retry"), "{run}");
    let (s, _, _) = call(
        &f.web,
        get(&format!("/runs/{}/ops/no-such-op", f.id()), Some(&token)),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// Reads server-sent events from `body` until `until` says stop: (event,
/// id, data) each.
async fn events(
    body: Body,
    until: impl Fn(&[(String, Option<String>, String)]) -> bool,
) -> Vec<(String, Option<String>, String)> {
    let mut body = body;
    let mut text = String::new();
    let mut out = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(30), body.frame()).await;
        let Ok(Some(Ok(frame))) = frame else { break };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        text.push_str(&String::from_utf8_lossy(&data));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let (mut ev, mut id, mut data) = ("message".to_string(), None, Vec::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    ev = v.into();
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v.to_string());
                }
            }
            if !block.starts_with(':') {
                out.push((ev, id, data.join("\n")));
            }
        }
        if until(&out) {
            break;
        }
    }
    out
}

/// The fixture made on a paused clock (the demo's 40 s in no time), then
/// the clock let go: streams tick in real time.
async fn fixture_then_real_time() -> Fixture {
    tokio::time::pause();
    let f = fixture(Ok(Reply::Done(Answer::Done))).await;
    tokio::time::resume();
    f
}

#[tokio::test]
async fn a_stream_resumes_after_the_last_event_it_had() {
    let f = fixture_then_real_time().await;
    let token = f.device(Scope::Watch, "tv");
    let last = playdeck::store::resume::read_log(&f.run.join("events.jsonl"))
        .unwrap()
        .last()
        .unwrap()
        .seq;
    let mut r = get(&format!("/runs/{}/events", f.id()), Some(&token));
    r.headers_mut()
        .insert("last-event-id", "10".parse().unwrap());
    let resp = router(f.web.clone()).oneshot(r).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let got = events(resp.into_body(), |e| e.iter().any(|(ev, ..)| ev == "view")).await;
    let ids: Vec<u64> = got
        .iter()
        .filter(|(ev, ..)| ev == "log")
        .map(|(_, id, _)| id.as_ref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        ids,
        (11..=last).collect::<Vec<_>>(),
        "every event after 10, once, in order"
    );
    let view = &got.last().unwrap().2;
    assert!(view.contains("Ship payments"), "then the view: {view}");
}

#[tokio::test]
async fn revoking_a_device_ends_its_streams() {
    let f = fixture_then_real_time().await;
    let token = f.device(Scope::Watch, "tv");
    let resp = router(f.web.clone())
        .oneshot(get(&format!("/runs/{}/events", f.id()), Some(&token)))
        .await
        .unwrap();
    let mut body = resp.into_body();
    // The first view comes, then the device is revoked.
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))));
    f.web.store.revoke("tv").unwrap();
    let rest = events(body, |e| e.iter().any(|(ev, ..)| ev == "revoked")).await;
    assert!(rest.iter().any(|(ev, ..)| ev == "revoked"), "{rest:?}");
    assert_eq!(
        call(&f.web, get("/", Some(&token))).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[test]
fn what_an_agent_wrote_is_shown_as_text() {
    use playdeck::agents::transcript::{Call, Entry, Outcome};
    let evil = r#"<script>alert(1)</script><img src=x onerror="alert(2)">"#;
    for e in [
        Entry::Said(evil.into()),
        Entry::Call(Call {
            name: evil.into(),
            args: evil.into(),
            outcome: Some(Outcome {
                ok: false,
                text: evil.into(),
            }),
        }),
        Entry::Error(evil.into()),
    ] {
        let html = playdeck::web::pages::turn(&e).into_string();
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }
}

/// Two failures or more: one button retries every one, each on the basis
/// its card shows, behind a confirmation that names them.
#[tokio::test(start_paused = true)]
async fn every_failure_is_retried_from_one_button() {
    let play = playdeck::play::Play::from_str(
        "two.toml",
        r#"
[play]
name = "two failures"
[palette]
roles = [{ role = "implementer" }]
[[operations]]
id = "x"
role = "implementer"
instruction = "x"
independent_root = true
sim = { duration_ms = 50, outcome = "fail" }
[[operations]]
id = "y"
role = "implementer"
instruction = "y"
independent_root = true
sim = { duration_ms = 50, outcome = "fail" }
"#,
    )
    .unwrap();
    let t = tempfile::tempdir().unwrap();
    let run = run_of(&play, 1.0, t.path(), "20261206-130000-two").await;
    let mut web = Web::new(
        Store::at(&t.path().join("web")).unwrap(),
        hosts_for(ADDR.parse().unwrap(), &[]),
    );
    web.runs = Some(vec![run]);
    let web = Arc::new(web);
    let code = web.store.new_code(Scope::Decide, None).unwrap();
    let token2 = web.store.pair(&code, None).unwrap().0;
    let (s, _, page) = call(&web, get("/runs/20261206-130000-two", Some(&token2))).await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains("Retry all 2 failures"), "{page}");
    let cmds = page
        .split("data-cmds=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .replace("&quot;", "\"");
    let cmds: Vec<serde_json::Value> = serde_json::from_str(&cmds).unwrap();
    let ops: Vec<&str> = cmds.iter().map(|c| c["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["x", "y"]);
    assert!(cmds.iter().all(
        |c| c["cmd"] == "retry" && c["on"].as_str().is_some_and(|o| o.starts_with("failure@"))
    ));
    assert!(
        page.contains("Retry all 2 failed operations: x, y?"),
        "{page}"
    );
    // Not for a device that watches.
    let code = web.store.new_code(Scope::Watch, None).unwrap();
    let watch = web.store.pair(&code, None).unwrap().0;
    let (_, _, page) = call(&web, get("/runs/20261206-130000-two", Some(&watch))).await;
    assert!(!page.contains("Retry all"), "{page}");
}
