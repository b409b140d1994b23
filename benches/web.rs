//! The served page's numbers (`cargo bench --bench web`, JSON on stdout):
//!
//! - `event_to_stream_ms`: from an event line written to a run's log to
//!   its `log` event arriving on a page's stream (what the browser's
//!   script then puts in the DOM), median and p95, with 1 page open and
//!   with 100 pages open on the same run;
//! - `rss_50_runs_mib`: the memory the server's process adds to watch 50
//!   runs (each the demo's log) and render the runs list over them.
//!
//! In process (the router called directly, as the fast tests do), on
//! this machine's real clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request as HttpRequest, header};
use http_body_util::BodyExt;
use playdeck::web::devices::{Scope, Store};
use playdeck::web::guard::Peer;
use playdeck::web::{Web, hosts_for, router};
use serde_json::json;
use tower::ServiceExt;

const HOST: &str = "127.0.0.1:7420";

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1 << 20) as f64
}

/// The demo's log at 60 s (virtual), and its play.
fn demo_log(into: &Path) -> (Vec<String>, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let play = playdeck::play::Play::demo();
        let scene = playdeck::console::screenshot::Scene::at(&play, 60.0, 120, 36, None)
            .await
            .unwrap();
        let dir = scene.session.run_dir.path.clone();
        let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        let play_text = std::fs::read_to_string(dir.join("play.toml")).unwrap();
        scene.finish().await;
        let _ = into;
        (log.lines().map(str::to_string).collect(), play_text)
    })
}

fn get(path: &str, token: &str) -> HttpRequest<Body> {
    let mut r = HttpRequest::get(path)
        .header(header::HOST, HOST)
        .header(header::COOKIE, format!("pd_device={token}"))
        .body(Body::empty())
        .unwrap();
    r.extensions_mut().insert(ConnectInfo(Peer {
        addr: "127.0.0.1:50000".parse().unwrap(),
        agent: None,
    }));
    r
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Latency of `lines` appended one at a time to `dir`'s log, as seen by
/// `pages` streams.
async fn latency(
    web: &Arc<Web>,
    token: &str,
    dir: &Path,
    id: &str,
    lines: &[String],
    pages: usize,
) -> (f64, f64) {
    let log = dir.join("events.jsonl");
    let mut streams = Vec::new();
    for _ in 0..pages {
        let resp = router(web.clone())
            .oneshot(get(&format!("/runs/{id}/events"), token))
            .await
            .unwrap();
        streams.push(resp.into_body());
    }
    // Each stream's first view, so what follows is only the new events.
    for b in &mut streams {
        let _ = tokio::time::timeout(Duration::from_secs(10), b.frame()).await;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    for mut b in streams {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut text = String::new();
            while let Ok(Some(Ok(f))) =
                tokio::time::timeout(Duration::from_secs(20), b.frame()).await
            {
                if let Ok(d) = f.into_data() {
                    text.push_str(&String::from_utf8_lossy(&d));
                    while let Some(end) = text.find("\n\n") {
                        let block: String = text.drain(..end + 2).collect();
                        if block.contains("event: log")
                            && let Some(id) = block.lines().find_map(|l| l.strip_prefix("id: "))
                        {
                            let _ = tx.send((id.to_string(), Instant::now()));
                        }
                    }
                }
            }
        });
    }
    drop(tx);
    let mut lat = Vec::new();
    for line in lines {
        let seq = playdeck::control::seq_of(line.as_bytes())
            .unwrap()
            .to_string();
        let at = Instant::now();
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            writeln!(f, "{line}").unwrap();
        }
        let mut got = 0;
        while got < pages {
            let Ok(Some((id, when))) =
                tokio::time::timeout(Duration::from_secs(10), rx.recv()).await
            else {
                break;
            };
            if id == seq {
                got += 1;
                lat.push(when.duration_since(at).as_secs_f64() * 1000.0);
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    (pct(&mut lat, 0.5), pct(&mut lat, 0.95))
}

fn main() {
    let t = tempfile::tempdir().unwrap();
    let (lines, play) = demo_log(t.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Store::at(&t.path().join("web")).unwrap();
        // One run whose log grows as the bench writes it.
        let live = t.path().join("20261206-000000-live");
        std::fs::create_dir_all(&live).unwrap();
        std::fs::write(live.join("play.toml"), &play).unwrap();
        let half = lines.len() / 2;
        std::fs::write(live.join("events.jsonl"), lines[..half].join("\n") + "\n").unwrap();
        // Fifty finished copies.
        let mut dirs: Vec<PathBuf> = vec![live.clone()];
        for i in 0..50 {
            let d = t.path().join(format!("20261206-0000{i:02}-copy"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("play.toml"), &play).unwrap();
            std::fs::write(d.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
            dirs.push(d);
        }
        let mut web = Web::new(store, hosts_for(HOST.parse().unwrap(), &[]));
        web.runs = Some(dirs.clone());
        let web = Arc::new(web);
        let code = web
            .store
            .new_code(Scope::Watch, Some("bench".into()))
            .unwrap();
        let token = web.store.pair(&code, None).unwrap().0;
        let id = "20261206-000000-live";
        let rest = &lines[half..];
        let one = latency(&web, &token, &live, id, &rest[..rest.len() / 2], 1).await;
        let hundred = latency(&web, &token, &live, id, &rest[rest.len() / 2..], 100).await;

        let before = rss_mib();
        for d in &dirs[1..] {
            let id = d.file_name().unwrap().to_string_lossy().into_owned();
            let _ = web.watches.get(&id, d).await;
        }
        let page = router(web.clone()).oneshot(get("/", &token)).await.unwrap();
        let _ = page.into_body().collect().await;
        let after = rss_mib();
        println!(
            "{}",
            json!({
                "bench": "web",
                "events_in_demo_log": lines.len(),
                "event_to_stream_ms": {
                    "1_page": {"median": one.0, "p95": one.1},
                    "100_pages": {"median": hundred.0, "p95": hundred.1},
                },
                "rss_50_runs_mib": {"before": before, "after": after, "added": after - before},
            })
        );
    });
}
