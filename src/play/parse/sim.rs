//! An operation's `sim` table: how the built-in sim agent behaves (its
//! time, outcome, usage and what it emits on the way).

use super::*;

pub(super) fn read_sim(r: &mut Reader, t: &Table<'_, '_>) -> Option<SimSpec> {
    t.deny_unknown(r, SIM_KEYS);
    let before = r.diags.len();
    let mut spec = SimSpec::default_for("");
    spec.duration_ms = 1000;
    if let Some((ms, _)) = t.int(r, "duration_ms", 0, MAX_SIM_MS) {
        spec.duration_ms = ms as u64;
    }
    if let Some((o, _)) = t.choice(r, "outcome", &SimOutcome::ALLOWED) {
        spec.outcome = match o.as_str() {
            "fail" => SimOutcome::Fail,
            "escalate" => SimOutcome::Escalate,
            _ => SimOutcome::Succeed,
        };
    }
    spec.result = t.json(r, "result").map(|(v, _)| v);
    spec.context = t.json_object(r, "context").map(|(m, _)| m);
    spec.error = t.string(r, "error").map(|(s, _)| s);
    spec.fail_attempts = t.int(r, "fail_attempts", 1, 1000).map(|(n, _)| n as u32);
    spec.cause = t
        .choice(r, "cause", &crate::kernel::retry::cause::ALL)
        .map(|(c, _)| c);
    spec.retry_after_ms = t
        .int(r, "retry_after_ms", 0, MAX_SIM_MS)
        .map(|(n, _)| n as u64);
    if let Some(u) = t.table(r, "usage") {
        u.deny_unknown(r, USAGE_KEYS);
        let tokens = |r: &mut Reader, key: &str| u.int(r, key, 0, i64::MAX).map(|(n, _)| n as u64);
        spec.usage = Some(crate::kernel::Usage {
            cost_usd: u
                .number(r, "cost_usd", |x| x >= 0.0, "an amount of USD, 0 or more")
                .map(|(x, _)| x),
            input_tokens: tokens(r, "input_tokens"),
            cached_input_tokens: tokens(r, "cached_input_tokens"),
            output_tokens: tokens(r, "output_tokens"),
        });
    }
    // What only a failing attempt uses would be ignored: said, not dropped.
    if spec.outcome != SimOutcome::Fail {
        for key in ["fail_attempts", "cause", "retry_after_ms", "error"] {
            if t.contains(key) {
                r.push(
                    Diagnostic::new(
                        t.key_span(key),
                        format!(
                            "`{key}` in {} has no effect: the simulated attempt does not fail",
                            t.name
                        ),
                        "only for outcome = \"fail\"",
                    )
                    .help("add outcome = \"fail\", or remove it"),
                );
            }
        }
    }
    spec.escalation = t.string(r, "escalation").map(|(s, _)| s);
    if let Some(v) = t.get("emits") {
        match v.get_ref() {
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let what = format!("{} emits[{i}]", t.name);
                    if let Some(e) = r.table(item, &what)
                        && let Some(emit) = read_emit(r, &e)
                    {
                        spec.emits.push(emit);
                    }
                }
            }
            _ => r.push(
                Diagnostic::new(v.span(), format!("`emits` in {} must be an array of tables", t.name), "expected an array")
                    .help("emits = [ { spawn_request = { instruction = \"...\", assignee = \"tester\" } } ]"),
            ),
        }
    }
    (r.diags.len() == before).then_some(spec)
}

pub(super) fn read_emit(r: &mut Reader, e: &Table<'_, '_>) -> Option<SimEmit> {
    e.deny_unknown(r, EMIT_KEYS);
    let at_ms = e.int(r, "at_ms", 0, MAX_SIM_MS).map(|(n, _)| n as u64);
    let has_spawn = e.contains("spawn_request");
    let has_esc = e.contains("escalation");
    if has_spawn == has_esc {
        r.push(
            Diagnostic::new(e.span.clone(), format!("{} must hold exactly one of spawn_request or escalation", e.name), "one request per emit")
                .help("{ spawn_request = { instruction = \"...\" } } or { escalation = { reason = \"...\" } }"),
        );
        return None;
    }
    if has_spawn {
        let req = e.table(r, "spawn_request")?;
        req.deny_unknown(r, REQUEST_KEYS);
        req.require(r, "instruction", "\"what the child should do\"")?;
        req.string(r, "instruction")?;
        req.string(r, "assignee");
        req.string(r, "operation");
        req.string(r, "reason");
        req.bool(r, "independent");
    }
    let mut value = Map::new();
    for key in ["spawn_request", "escalation"] {
        if let Some((v, _)) = e.json(r, key) {
            value.insert(key.to_string(), v);
        }
    }
    Some(SimEmit {
        at_ms,
        value: Value::Object(value),
    })
}
