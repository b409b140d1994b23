//! `[retry]`, and `retry` in an agent's table: which failed attempts come
//! back by themselves (`kernel::retry`).

use std::sync::Arc;
use std::time::Duration;

use super::reader::{Reader, Table};
use crate::kernel::retry::{RetrySettings, cause};

const RETRY_KEYS: &[&str] = &["attempts", "backoff", "max_backoff", "max_wait", "on"];

/// A day: a longer wait is a mistake.
const MAX_WAIT_SECONDS: f64 = 86_400.0;

/// Reads the retry table `key` of `t` (`[retry]` at the root, `retry` in
/// an agent's table).
pub(super) fn read(r: &mut Reader, t: &Table<'_, '_>, key: &str) -> Option<RetrySettings> {
    let t = t.table(r, key)?;
    t.deny_unknown(r, RETRY_KEYS);
    let seconds = |r: &mut Reader, key: &str| {
        t.number(
            r,
            key,
            |x| (0.0..=MAX_WAIT_SECONDS).contains(&x),
            "seconds, from 0 to 86400 (a day)",
        )
        .map(|(x, _)| Duration::from_secs_f64(x))
    };
    let mut s = RetrySettings {
        attempts: t.int(r, "attempts", 1, 100).map(|(n, _)| n as u32),
        backoff: seconds(r, "backoff"),
        max_backoff: seconds(r, "max_backoff"),
        max_wait: seconds(r, "max_wait"),
        on: None,
    };
    if let Some(list) = t.strings(r, "on") {
        let mut on = Vec::new();
        for (c, span) in list {
            if cause::ALL.contains(&c.as_str()) {
                on.push(Arc::from(c.as_str()));
            } else {
                r.push(
                    super::diag::Diagnostic::new(
                        span,
                        format!("{} names an unknown cause {c:?}", t.name),
                        "not a cause",
                    )
                    .help(format!("causes: {}", cause::ALL.join(", "))),
                );
            }
        }
        s.on = Some(on);
    }
    if let (Some(b), Some(m)) = (s.backoff, s.max_backoff)
        && b > m
    {
        r.error(
            t.key_span("backoff"),
            format!(
                "{}: backoff {}s is longer than max_backoff {}s",
                t.name,
                b.as_secs_f64(),
                m.as_secs_f64()
            ),
            "longer than max_backoff",
        );
    }
    Some(s)
}
