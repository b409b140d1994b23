//! `playdeck ctl` and `playdeck capacity`: what a script types, turned into
//! control requests (live runs) or file updates (finished runs), and the
//! answers turned into text or JSON. Returns (exit code, stdout, stderr).

use serde_json::{Value, json};

use crate::capacity::{self, CapacityError, Lifetime};
use crate::control::{self, ControlFailure, Request};

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Input mistakes exit 2; refusals and runs that are not live exit 1.
fn code_of(f: &ControlFailure) -> i32 {
    match f.code.as_str() {
        "no_run" | "bad_request" | "unknown_profile" | "duplicate_profile"
        | "over_max_instances" | "over_max_nodes" | "bad_profile" => 2,
        _ => 1,
    }
}

fn fail(f: ControlFailure, json: bool) -> Output {
    let code = code_of(&f);
    if json {
        Output {
            code,
            stdout: format!("{}\n", json!({"status": "error", "error": f})),
            stderr: String::new(),
        }
    } else {
        Output {
            code,
            stdout: String::new(),
            stderr: format!("playdeck: {}\n", f.message),
        }
    }
}

fn ok(v: Value, json: bool, text: impl FnOnce(&Value) -> String) -> Output {
    Output {
        code: 0,
        stdout: if json { format!("{v:#}\n") } else { text(&v) },
        stderr: String::new(),
    }
}

/// `playdeck ctl RUN ...`.
pub fn ctl(run: &str, req: Request, json: bool) -> Output {
    let dir = match control::resolve_run(run) {
        Ok(d) => d,
        Err(f) => return fail(f, json),
    };
    let what = serde_json::to_value(&req)
        .ok()
        .and_then(|v| v["cmd"].as_str().map(str::to_string));
    match control::send(&dir, &req) {
        Ok(v) => ok(v, json, |v| match &req {
            Request::Status => status_text(v),
            Request::Release => release_text(v),
            _ => format!("ok: {}\n", what.unwrap_or_default()),
        }),
        Err(f) => fail(f, json),
    }
}

/// `coder=2` or `coder` (one).
pub fn parse_profile(spec: &str) -> Result<(String, u32), ControlFailure> {
    let bad = |why: &str| {
        ControlFailure::new(
            "bad_profile",
            format!(
                "--profile {spec:?}: {why}; write PROFILE or PROFILE=COUNT, for example coder=2"
            ),
        )
    };
    let (name, count) = match spec.split_once('=') {
        Some((n, c)) => (
            n,
            c.parse::<u32>()
                .map_err(|_| bad("the count is not a whole number"))?,
        ),
        None => (spec, 1),
    };
    if name.is_empty() {
        return Err(bad("the profile name is empty"));
    }
    if count == 0 {
        return Err(bad("the count must be at least 1"));
    }
    Ok((name.to_string(), count))
}

pub fn capacity_ensure(
    run: &str,
    specs: &[String],
    lifetime: Option<Lifetime>,
    json: bool,
) -> Output {
    let profiles = match specs
        .iter()
        .map(|s| parse_profile(s))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(p) => p,
        Err(f) => return fail(f, json),
    };
    let dir = match control::resolve_run(run) {
        Ok(d) => d,
        Err(f) => return fail(f, json),
    };
    match control::send(&dir, &Request::CapacityEnsure { profiles, lifetime }) {
        Ok(v) => ok(v, json, agents_text),
        Err(f) if f.code == "not_live" => fail(
            ControlFailure::new(
                "not_live",
                format!("{}; ensure needs a live run", f.message),
            ),
            json,
        ),
        Err(f) => fail(f, json),
    }
}

pub fn capacity_status(run: &str, json: bool) -> Output {
    let dir = match control::resolve_run(run) {
        Ok(d) => d,
        Err(f) => return fail(f, json),
    };
    match control::send(&dir, &Request::CapacityStatus) {
        Ok(v) => ok(v, json, agents_text),
        Err(f) if f.code == "not_live" => match capacity::offline::status(&dir) {
            Ok(s) => ok(
                serde_json::to_value(s).expect("serialisable"),
                json,
                agents_text,
            ),
            Err(e) => fail(e.into(), json),
        },
        Err(f) => fail(f, json),
    }
}

pub fn capacity_release(run: &str, json: bool) -> Output {
    let dir = match control::resolve_run(run) {
        Ok(d) => d,
        Err(f) => return fail(f, json),
    };
    match control::send(&dir, &Request::Release) {
        Ok(v) => ok(v, json, release_text),
        Err(f) if f.code == "not_live" => match capacity::offline::release(&dir) {
            Ok(r) => ok(
                serde_json::to_value(r).expect("serialisable"),
                json,
                release_text,
            ),
            Err(e) => fail(
                ControlFailure::from(CapacityError::new(&e.code, e.message)),
                json,
            ),
        },
        Err(f) => fail(f, json),
    }
}

fn agents_text(v: &Value) -> String {
    let mut s = String::new();
    if let Some(state) = v["state"].as_str() {
        s.push_str(&format!(
            "capacity of {} ({state}{}), max_nodes {}, {} active\n",
            v["loop_id"].as_str().unwrap_or("?"),
            if v["live"] == false {
                ", run finished"
            } else {
                ""
            },
            v["max_nodes"],
            v["active_nodes"]
        ));
    }
    for a in v["agents"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "  {:<44} {:<9} {:<14} {:<8}{}{}\n",
            a["name"].as_str().unwrap_or(""),
            a["state"].as_str().unwrap_or(""),
            a["lifetime"].as_str().unwrap_or(""),
            a["source"].as_str().unwrap_or(""),
            a["op"]
                .as_str()
                .map(|o| format!(" running {o}"))
                .unwrap_or_default(),
            a["reason"]
                .as_str()
                .map(|r| format!(" (retained: {r})"))
                .unwrap_or_default(),
        ));
    }
    if let Some(w) = v["waiting"].as_object().filter(|w| !w.is_empty()) {
        let parts: Vec<String> = w.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s.push_str(&format!("waiting: {}\n", parts.join(", ")));
    }
    for b in v["blocked"].as_array().into_iter().flatten() {
        s.push_str(&format!("blocked: {}\n", b.as_str().unwrap_or("")));
    }
    s
}

fn release_text(v: &Value) -> String {
    let names = |k: &str| -> Vec<String> {
        v[k].as_array()
            .into_iter()
            .flatten()
            .map(|x| match x.as_str() {
                Some(n) => n.to_string(),
                None => format!(
                    "{} ({})",
                    x["name"].as_str().unwrap_or(""),
                    x["reason"].as_str().unwrap_or("")
                ),
            })
            .collect()
    };
    format!(
        "released {}: {}\nretained {}: {}\n",
        v["released_count"],
        names("released").join(", "),
        v["retained_count"],
        names("retained").join(", ")
    )
}

fn status_text(v: &Value) -> String {
    let mut s = format!(
        "run {} \"{}\": {} — round {}, {:.1}s, {} running\n",
        v["run_id"].as_str().unwrap_or("?"),
        v["play"].as_str().unwrap_or("?"),
        v["state"].as_str().unwrap_or("?"),
        v["round"],
        v["elapsed"].as_f64().unwrap_or(0.0),
        v["running"],
    );
    if let Some(l) = v["lanes"].as_object() {
        let parts: Vec<String> = l.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s.push_str(&format!("lanes: {}\n", parts.join(" · ")));
    }
    if let Some(a) = v["awaiting_approval"].as_array().filter(|a| !a.is_empty()) {
        let names: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
        s.push_str(&format!("awaiting approval: {}\n", names.join(", ")));
    }
    if v["capacity"].is_object() {
        s.push_str(&agents_text(&v["capacity"]));
    }
    s
}
