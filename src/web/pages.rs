//! The pages, rendered on the server. maud escapes every interpolation,
//! so what an agent wrote (its words, tool calls, file names, errors)
//! reaches the browser as text, never as markup. Each page is a frame
//! around one view (`#view`) that its event stream replaces as the run
//! moves; the views are plain functions over the operator's view model.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::Web;
use super::devices::{Device, Scope};
use crate::agents::transcript::Entry;
use crate::kernel::Lane;
use crate::operator::model::ViewModel;
use crate::operator::needs::{Need, NeedKind, needs};
use crate::operator::words::duration;

/// Rows shown of one lane; the rest are counted.
pub const LANE_ROWS: usize = 50;
/// Turns shown of a conversation in a card, and lines of each.
const CARD_TURNS: usize = 4;
const CARD_LINES: usize = 3;

const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

pub async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
        .into_response()
}

pub async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLE,
    )
        .into_response()
}

/// A whole page: `view` inside the frame, `stream` the events that keep
/// it current.
fn page(title: &str, device: Option<&Device>, stream: Option<&str>, view: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · playdeck" }
                    link rel="stylesheet" href="/assets/app.css";
                    script src="/assets/app.js" defer {}
                }
                body data-stream=[stream] {
                    nav {
                        a href="/" { "Runs" }
                        a href="/needs" { "Needs you" }
                        @if let Some(d) = device {
                            span.device { (d.name) " · " (d.scope.as_str()) }
                        }
                    }
                    div #msg role="status" aria-live="polite" {}
                    main #view { (view) }
                }
            }
        }
        .into_string(),
    )
}

/// The answer to a request without a paired device.
pub fn not_paired() -> Response {
    let body = page(
        "not paired",
        None,
        None,
        html! {
            h1 { "This device is not paired" }
            p { "Run " code { "playdeck web pair" } " on the machine that runs playdeck, and open the address it prints (or scan its code) on this device." }
        },
    );
    (StatusCode::UNAUTHORIZED, body).into_response()
}

/// Nothing at this address (an open path too: no device is needed to
/// be told so).
pub async fn not_found(device: Option<Extension<Device>>) -> Response {
    let body = page(
        "not found",
        device.as_ref().map(|d| &d.0),
        None,
        html! { h1 { "Nothing here" } p { a href="/" { "All runs" } } },
    );
    (StatusCode::NOT_FOUND, body).into_response()
}

#[derive(serde::Deserialize)]
pub struct PairQuery {
    #[serde(default)]
    code: String,
}

/// `GET /pair?code=…`: a button that pairs this browser (a GET never
/// consumes a code: a link preview must not pair itself).
pub async fn pair_page(Query(q): Query<PairQuery>) -> Html<String> {
    page(
        "pair",
        None,
        None,
        html! {
            h1 { "Pair this device" }
            p { "It will see your runs and answer what the pairing allows." }
            form.pair data-pair=(q.code) {
                label for="device-name" { "Name for this device" }
                input #device-name name="name" maxlength="40" placeholder="phone" autocomplete="off";
                button type="submit" { "Pair" }
            }
        },
    )
}

// ---- the runs -------------------------------------------------------------

pub async fn runs_page(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
) -> Html<String> {
    page(
        "runs",
        Some(&device),
        Some("/events?view=runs"),
        runs_view(&web).await,
    )
}

/// How many things wait on a person in each live run, by id.
async fn waiting_counts(web: &Web, rows: &[crate::control::listing::RunRow]) -> Vec<usize> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(if r.live {
            web.watches
                .get(&r.id, &r.dir)
                .await
                .view(|v| needs(v).len())
        } else {
            0
        });
    }
    out
}

pub async fn runs_view(web: &Web) -> Markup {
    let mut rows = web.rows().await;
    let counts = waiting_counts(web, &rows).await;
    let mut both: Vec<_> = rows.drain(..).zip(counts).collect();
    // Those that need you first.
    both.sort_by_key(|(_, n)| std::cmp::Reverse((*n > 0) as u8));
    html! {
        h1 { "Runs" }
        @if both.is_empty() {
            p.empty { "No runs yet. Start one with " code { "playdeck run PLAY" } "." }
        }
        ul.runs {
            @for (r, n) in &both {
                li.run.needs[*n > 0] {
                    a href={ "/runs/" (r.id) } {
                        span.id { (r.id) }
                        span.play { (r.play) }
                        span.state {
                            @if *n > 0 { strong { "needs you ×" (n) } " · " }
                            (r.state)
                        }
                        span.facts {
                            (duration(r.elapsed))
                            " · " (r.done.map_or("?".to_string(), |d| d.to_string())) "/" (r.total)
                            @if let Some((usd, tok)) = r.spent {
                                @if usd > 0.0 || tok > 0.0 { " · $" (format!("{usd:.2}")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

// ---- what needs you -------------------------------------------------------

pub async fn needs_page(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
) -> Html<String> {
    page(
        "needs you",
        Some(&device),
        Some("/events?view=needs"),
        needs_view(&web, &device).await,
    )
}

pub async fn needs_view(web: &Web, device: &Device) -> Markup {
    let rows = web.rows().await;
    let mut cards = Vec::new();
    for r in rows.iter().filter(|r| r.live) {
        let w = web.watches.get(&r.id, &r.dir).await;
        let found = w.view(|v| {
            needs(v)
                .into_iter()
                .map(|n| card(&r.id, &w.dir, v, &n, device.scope))
                .collect::<Vec<_>>()
        });
        cards.extend(found);
    }
    html! {
        h1 { "Needs you" }
        @if cards.is_empty() { p.empty { "Nothing waits on you." } }
        @for c in cards { (c) }
    }
}

/// A command button: its request as JSON, sent by the page's script.
fn button(label: &str, cmd: serde_json::Value, class: &str) -> Markup {
    html! { button.(class) type="button" data-cmd=(cmd.to_string()) { (label) } }
}

/// A command that takes words (a reason, a note, a raise).
fn with_words(
    label: &str,
    cmd: serde_json::Value,
    field: &str,
    placeholder: &str,
    id: &str,
) -> Markup {
    html! {
        div.words {
            input id=(id) placeholder=(placeholder) autocomplete="off";
            button type="button" data-cmd=(cmd.to_string()) data-words=(field) data-input=(id) { (label) }
        }
    }
}

/// One thing that waits on a person, with what it is about and the
/// answers this device may give.
pub fn card(run: &str, dir: &std::path::Path, v: &ViewModel, n: &Need, scope: Scope) -> Markup {
    let on = n.basis.as_ref().map(|b| b.to_string());
    let op = n.op.as_deref().unwrap_or("");
    let cmd = |c: &str| {
        let mut j = serde_json::json!({"cmd": c, "op": op});
        if let Some(on) = &on {
            j["on"] = serde_json::Value::String(on.clone());
        }
        j
    };
    let key = format!("{run}-{op}-{}", n.kind.words().replace(' ', "-"));
    // The agent that runs it, as its attempt recorded (the play's role
    // may name it rather than the operation).
    let agent =
        n.ix.map(|ix| v.node(ix))
            .filter(|node| node.attempt > 0)
            .and_then(|node| {
                let f =
                    dir.join("logs")
                        .join(format!("{}.{}.command.json", node.name(), node.attempt));
                let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).ok()?).ok()?;
                v["agent"].as_str().map(str::to_string)
            })
            .or_else(|| n.agent.as_deref().map(str::to_string));
    let mut who = Vec::new();
    if let Some(r) = &n.role {
        who.push(format!("role {r}"));
    }
    if let Some(a) = &agent {
        who.push(format!("agent {a}"));
    }
    // An operation's wait, from when it entered its lane (a run time, so
    // the card stays the same until what it shows changes).
    if n.ix.is_some() {
        who.push(format!("waiting since {}", duration(n.since)));
    }
    let turns =
        n.ix.map(|ix| v.node(ix))
            .filter(|node| node.attempt > 0)
            .and_then(|node| {
                crate::agents::transcript::last_turns(
                    &dir.join("logs"),
                    node.name(),
                    node.attempt,
                    CARD_TURNS,
                )
            })
            .map(|(e, _)| e)
            .unwrap_or_default();
    html! {
        article.card.(format!("k-{:?}", n.kind).to_lowercase()) id=(key) data-run=(run) data-basis=[on.as_deref()] {
            header {
                span.kind { (n.kind.words()) }
                a href={ "/runs/" (run) } { (run) }
                @if let Some(op) = &n.op { " · " a href={ "/runs/" (run) "/ops/" (op) } { strong { (op) } } }
            }
            p.what { (n.what) }
            @if !who.is_empty() { p.who { (who.join(" · ")) } }
            @if let Some(d) = &n.detail { pre.detail { (d) } }
            @if !turns.is_empty() { ol.turns { @for e in &turns { (turn(&clipped(e, CARD_LINES))) } } }
            div.actions {
                @if scope >= Scope::Decide {
                    @match n.kind {
                        NeedKind::Gate => {
                            (button("Approve", cmd("approve"), "go"))
                            (with_words("Deny", cmd("deny"), "reason", "why (recorded)", &format!("{key}-why")))
                        }
                        NeedKind::Permission => {
                            (button("Permit", cmd("permit"), "go"))
                            (with_words("Deny", cmd("deny"), "reason", "why (the agent is told)", &format!("{key}-why")))
                        }
                        NeedKind::Review => {
                            (button("Approve", cmd("approve"), "go"))
                            (with_words("Send back", cmd("say"), "text", "what to change", &format!("{key}-note")))
                            (with_words("Deny", cmd("deny"), "reason", "why it does not land", &format!("{key}-why")))
                        }
                        NeedKind::Conflict => {
                            (button("Resolved", cmd("resolve"), "go"))
                            (with_words("Leave unlanded", cmd("deny"), "reason", "why", &format!("{key}-why")))
                        }
                        NeedKind::Escalation | NeedKind::Failure => {
                            (button("Retry", cmd("retry"), "go"))
                            (with_words("Send back", cmd("say"), "text", "what to do differently", &format!("{key}-note")))
                        }
                        NeedKind::SpendCap => {
                            @if scope >= Scope::Steer {
                                (with_words("Raise", serde_json::json!({"cmd": "budget"}), "raise", "usd=+5 or tokens=+100000", &format!("{run}-raise")))
                            } @else {
                                p.note { "Raising a cap needs a device paired with --scope steer." }
                            }
                        }
                    }
                } @else {
                    p.note { "This device watches only." }
                }
            }
        }
    }
}

/// One turn of a conversation.
pub fn turn(e: &Entry) -> Markup {
    match e {
        Entry::Said(t) => html! { li.said { (t) } },
        Entry::Thought(t) => html! { li.thought { (t) } },
        Entry::Asked { by, text } => html! {
            li.asked { @if let Some(b) = by { span.by { (b) ": " } } (text) }
        },
        Entry::Call(c) => html! {
            li.call {
                span.tool { (c.name) } " " code { (c.args) }
                @if let Some(o) = &c.outcome {
                    @if o.ok { span.ok { " ✓" } } @else { span.bad { " ✗" } }
                    @if !o.text.trim().is_empty() { pre.result { (first_lines(&o.text, crate::agents::transcript::RESULT_LINES)) } }
                }
            }
        },
        Entry::Error(t) => html! { li.error { (t) } },
        Entry::Plain(t) => html! { li.plain { (t) } },
        Entry::Stderr(t) => html! { li.stderr { (t) } },
    }
}

/// A turn cut to its first `n` lines (a card shows what the agent was
/// doing, not its whole prompt).
fn clipped(e: &Entry, n: usize) -> Entry {
    let cut = |t: &str| first_lines(t, n);
    match e {
        Entry::Said(t) => Entry::Said(cut(t)),
        Entry::Thought(t) => Entry::Thought(cut(t)),
        Entry::Asked { by, text } => Entry::Asked {
            by: by.clone(),
            text: cut(text),
        },
        Entry::Error(t) => Entry::Error(cut(t)),
        Entry::Plain(t) => Entry::Plain(cut(t)),
        Entry::Stderr(t) => Entry::Stderr(cut(t)),
        Entry::Call(c) => Entry::Call(crate::agents::transcript::Call {
            name: c.name.clone(),
            args: c.args.clone(),
            outcome: c
                .outcome
                .as_ref()
                .map(|o| crate::agents::transcript::Outcome {
                    ok: o.ok,
                    text: cut(&o.text),
                }),
        }),
    }
}

fn first_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    let mut s = all.iter().take(n).copied().collect::<Vec<_>>().join("\n");
    if all.len() > n {
        s.push_str(&format!("\n… {} more lines", all.len() - n));
    }
    s
}

// ---- a run ----------------------------------------------------------------

pub async fn run_page(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
    Path(id): Path<String>,
) -> Response {
    let Some(dir) = web.run_dir(&id) else {
        return not_found(Some(Extension(device))).await;
    };
    let w = web.watches.get(&id, &dir).await;
    let view = w.view(|v| run_view(&id, &dir, v, &device));
    let stream = format!("/runs/{id}/events");
    page(&id, Some(&device), Some(&stream), view).into_response()
}

/// A run's state in a line: `running`, `paused (by …)`, `finished: failed`.
fn run_state(v: &ViewModel) -> String {
    match (&v.run.finished, v.run.paused) {
        (Some(o), _) => format!("finished: {}", o.as_str()),
        (None, true) => match &v.run.paused_by {
            Some(by) => format!("paused — {by}"),
            None => "paused".into(),
        },
        (None, false) => "running".into(),
    }
}

pub fn run_view(id: &str, dir: &std::path::Path, v: &ViewModel, device: &Device) -> Markup {
    let waiting = needs(v);
    let live = v.run.finished.is_none();
    let total = v.nodes.len();
    let settled = v.counts.settled();
    html! {
        h1 { (v.run.play) }
        p.runline {
            span.id { (id) } " · " (run_state(v)) " · " (duration(v.run.elapsed))
            " · " (settled) "/" (total) " done"
            @if v.spend.usd > 0.0 { " · $" (format!("{:.2}", v.spend.usd)) }
        }
        @if let Some(c) = v.cause() { p.cause { (c) } }
        @if live && device.scope >= Scope::Steer {
            div.actions.run {
                @if v.run.paused {
                    (button("Resume", serde_json::json!({"cmd": "resume"}), "go"))
                    (button("Step", serde_json::json!({"cmd": "step"}), ""))
                } @else {
                    (button("Pause", serde_json::json!({"cmd": "pause"}), ""))
                }
                button.danger type="button" data-cmd=(serde_json::json!({"cmd": "cancel"}).to_string())
                    data-confirm=(format!("Cancel run {id}? Its {} running operation(s) are stopped and the {} not started are skipped.", v.running(), total - settled - v.running())) { "Cancel run" }
            }
        }
        @if !waiting.is_empty() {
            section.needs {
                h2 { "Needs you ×" (waiting.len()) }
                @if device.scope >= Scope::Decide { (retry_all(&waiting)) }
                @for n in &waiting { (card(id, dir, v, n, device.scope)) }
            }
        }
        section.lanes {
            @for lane in Lane::ALL {
                (lane_view(id, v, lane))
            }
        }
    }
}

/// One button for every failure a retry could take up (two or more),
/// each retried on the basis its card shows.
fn retry_all(waiting: &[Need]) -> Markup {
    let failed: Vec<&Need> = waiting
        .iter()
        .filter(|n| n.kind == NeedKind::Failure)
        .collect();
    if failed.len() < 2 {
        return html! {};
    }
    let cmds: Vec<serde_json::Value> = failed
        .iter()
        .map(|n| {
            let mut j = serde_json::json!({"cmd": "retry", "op": n.op.as_deref().unwrap_or("")});
            if let Some(b) = &n.basis {
                j["on"] = serde_json::Value::String(b.to_string());
            }
            j
        })
        .collect();
    let names: Vec<&str> = failed.iter().filter_map(|n| n.op.as_deref()).collect();
    let shown = if names.len() > 5 {
        format!("{}, … ({} more)", names[..5].join(", "), names.len() - 5)
    } else {
        names.join(", ")
    };
    html! {
        div.actions {
            button.go type="button" data-cmds=(serde_json::Value::Array(cmds).to_string())
                data-confirm=(format!("Retry all {} failed operations: {shown}?", failed.len())) {
                "Retry all " (failed.len()) " failures"
            }
        }
    }
}

fn lane_view(id: &str, v: &ViewModel, lane: Lane) -> Markup {
    let list = v.lane(lane);
    let n = list.len();
    html! {
        details.lane open[n > 0 && n <= LANE_ROWS] {
            summary { (lane.as_str().replace('_', " ")) " " span.count { (n) } }
            ul {
                @for ix in list.window(0, LANE_ROWS) {
                    @let node = v.node(ix);
                    li {
                        a href={ "/runs/" (id) "/ops/" (node.name()) } { (v.label(ix)) }
                        @if node.attempt > 1 { span.attempt { " #" (node.attempt) } }
                        @if node.held { span.held { " held" } }
                        @if let Some(a) = &node.asking { span.asking { " " (node.asked.say(a)) } }
                        @if let Some(e) = &node.error { span.err { " " (first_lines(e, 1)) } }
                    }
                }
                @if n > LANE_ROWS { li.more { "and " (n - LANE_ROWS) " more" } }
            }
        }
    }
}

// ---- an operation ---------------------------------------------------------

pub async fn op_page(
    State(web): State<Arc<Web>>,
    Extension(device): Extension<Device>,
    Path((id, op)): Path<(String, String)>,
) -> Response {
    let Some(dir) = web.run_dir(&id) else {
        return not_found(Some(Extension(device))).await;
    };
    let w = web.watches.get(&id, &dir).await;
    let Some((view, attempt)) = w.view(|v| {
        let node = v.by_name(&op)?;
        let ix = v.ix(&node.op.op_id)?;
        Some((op_view(&id, &dir, v, ix, &device), node.attempt))
    }) else {
        return not_found(Some(Extension(device))).await;
    };
    let logs = dir.join("logs");
    let entries = tokio::task::spawn_blocking({
        let op = op.clone();
        move || conversation(&logs, &op, attempt)
    })
    .await
    .unwrap_or_default();
    let stream = format!("/runs/{id}/ops/{op}/events");
    let body = html! {
        (view)
        section.conversation {
            h2 { "Conversation" @if attempt > 0 { " (attempt " (attempt) ")" } }
            ol #turns data-count=(entries.len()) { @for e in &entries { (turn(e)) } }
            @if attempt == 0 { p.empty { "It has not started." } }
        }
    };
    page(&format!("{op} · {id}"), Some(&device), Some(&stream), body).into_response()
}

/// Every turn of an attempt's conversation so far.
pub fn conversation(logs: &std::path::Path, op: &str, attempt: u32) -> Vec<Entry> {
    if attempt == 0 {
        return Vec::new();
    }
    let mut t = crate::agents::transcript::Transcript::for_attempt(logs, op, attempt);
    let mut log =
        crate::files::tail::LogTail::whole(logs.join(format!("{op}.{attempt}.stdout.log")));
    for _ in 0..64 {
        let got = log.read();
        if got.lines.is_empty() {
            break;
        }
        for l in &got.lines {
            t.feed(l);
        }
    }
    t.entries().iter().cloned().collect()
}

/// The part of an operation's page its run's stream refreshes.
pub fn op_view(id: &str, dir: &std::path::Path, v: &ViewModel, ix: u32, device: &Device) -> Markup {
    let n = v.node(ix);
    let mine: Vec<Need> = needs(v).into_iter().filter(|x| x.ix == Some(ix)).collect();
    html! {
        div #opview {
            p { a href={ "/runs/" (id) } { "← " (id) } }
            h1 { (v.label(ix)) }
            p.runline {
                (n.lane.as_str().replace('_', " "))
                @if let Some(r) = n.role() { " · role " (r) }
                @if !n.op.metadata.agent.is_empty() { " · agent " (n.op.metadata.agent) }
                @if n.held { " · held" }
            }
            p.instruction { (first_lines(&n.op.instruction, 12)) }
            @for x in &mine { (card(id, dir, v, x, device.scope)) }
            @if n.lane == Lane::Running && mine.is_empty() && device.scope >= Scope::Decide {
                (with_words("Say", serde_json::json!({"cmd": "say", "op": n.name().to_string()}), "text", "say to the agent", &format!("{id}-{}-say", n.name())))
            }
            @if !n.attempts.is_empty() {
                h2 { "Attempts" }
                ol.attempts {
                    @for a in &n.attempts {
                        li {
                            "#" (a.attempt) " " (&*a.outcome)
                            " · " (duration(a.finished_at.unwrap_or(v.run.elapsed) - a.started_at))
                            @if let Some(e) = &a.error { " · " span.err { (first_lines(e, 2)) } }
                        }
                    }
                }
            }
        }
    }
}

/// Markup a script may not run: for the tests that show it inert.
pub fn escaped(text: &str) -> String {
    html! { (text) }.into_string()
}
