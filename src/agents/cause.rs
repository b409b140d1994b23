//! A failure's cause from what the agent CLI said: the same words for
//! every CLI (`kernel::retry::cause`), so the retry policy and the operator
//! read a rate limit as a rate limit whichever CLI met it.
//!
//! A CLI that reports the provider's HTTP status in a field (claude's
//! `api_error_status`, opencode's `statusCode`, copilot's `statusCode`)
//! gives it to [`from_status`]; the rest is read from the error's text
//! ([`classify`]), tuned on what the real CLIs print (the captures in
//! `tests/realcli/captures/`): `unexpected status 401 Unauthorized`,
//! `API Error: 529 Overloaded`, `Resource has been exhausted`, `stream
//! disconnected before completion`, ...

use std::time::Duration;

use crate::kernel::retry::cause;
/// The causes themselves, so callers name them from here.
pub use crate::kernel::retry::cause::*;

/// A cause and, for a rate limit, how long the provider asked to wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cause {
    pub category: &'static str,
    pub wait: Option<Duration>,
}

impl Cause {
    fn of(category: &'static str) -> Self {
        Cause {
            category,
            wait: None,
        }
    }
}

/// The cause an HTTP status of the provider means, if it is an error one.
pub fn from_status(status: u64) -> Option<&'static str> {
    Some(match status {
        401 | 403 => cause::AUTH,
        429 => cause::RATE_LIMIT,
        503 | 529 => cause::OVERLOADED,
        500..=599 => cause::SERVER_ERROR,
        _ => return None,
    })
}

/// Words that name a cause, strongest first: a limit the CLI enforced
/// itself, then the provider's refusals, then passing trouble.
const WORDS: &[(&str, &[&str])] = &[
    (
        cause::TURN_LIMIT,
        &[
            "max_turns",
            "maximum number of turns",
            "max turns",
            "turn limit",
        ],
    ),
    (
        cause::BUDGET_LIMIT,
        &[
            "max_budget",
            "budget exceeded",
            "exceeded the budget",
            "budget limit",
        ],
    ),
    (
        cause::AUTH,
        &[
            "authentication",
            "unauthorized",
            "unauthenticated",
            "invalid api key",
            "invalid x-api-key",
            "incorrect api key",
            "api key not valid",
            "not logged in",
            "please run /login",
            "permission_denied",
        ],
    ),
    (
        cause::RATE_LIMIT,
        &[
            "rate limit",
            "rate_limit",
            "ratelimit",
            "too many requests",
            "resource has been exhausted",
            "resource_exhausted",
            "quota",
        ],
    ),
    (
        cause::OVERLOADED,
        &[
            "overloaded",
            "high demand",
            "service unavailable",
            "temporarily unavailable",
            "unavailable",
        ],
    ),
    (
        cause::NETWORK,
        &[
            "econnrefused",
            "unable to connect",
            "eai_again",
            "enotfound",
            "connection refused",
            "fetch failed",
            "network is unreachable",
        ],
    ),
    (
        cause::SERVER_ERROR,
        &[
            "internal server error",
            "internal error",
            "server_error",
            "server error",
            "server had an error",
            "stream disconnected",
            "connection to the api was lost",
            "connection was closed unexpectedly",
            "econnreset",
            "socket hang up",
            "premature close",
            "incomplete json segment",
            "error decoding response body",
            "bad gateway",
            "gateway timeout",
        ],
    ),
];

/// The cause an error text tells, if any.
pub fn classify(text: &str) -> Option<Cause> {
    let t = text.to_ascii_lowercase();
    let category = status_in(&t).and_then(from_status).or_else(|| {
        WORDS
            .iter()
            .find(|(_, words)| words.iter().any(|w| t.contains(w)))
            .map(|(c, _)| *c)
    })?;
    let mut c = Cause::of(category);
    if category == cause::RATE_LIMIT {
        c.wait = wait_in(&t);
    }
    Some(c)
}

/// An HTTP status the text gives as one: a 4xx or 5xx standing alone,
/// after `status`, `code`, `error`, `http` or `(`, or followed by its
/// reason phrase — not any three digits (a line number, a count).
fn status_in(t: &str) -> Option<u64> {
    const BEFORE: &[&str] = &["status", "code", "error", "http", "(", "\"code\""];
    const AFTER: &[&str] = &[
        " unauthorized",
        " forbidden",
        " too many requests",
        " internal server error",
        " bad gateway",
        " service unavailable",
        " gateway timeout",
        " overloaded",
    ];
    let b = t.as_bytes();
    let mut i = 0;
    while i + 3 <= b.len() {
        let standalone = b[i..i + 3].iter().all(u8::is_ascii_digit)
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && b.get(i + 3).is_none_or(|c| !c.is_ascii_alphanumeric());
        if standalone && matches!(b[i], b'4' | b'5') {
            let before = t[..i].trim_end_matches([' ', ':', '=']);
            let before = &before[before.len().saturating_sub(12)..];
            let after = &t[i + 3..];
            if BEFORE.iter().any(|w| before.ends_with(w))
                || AFTER.iter().any(|w| after.starts_with(w))
            {
                let n: u64 = t[i..i + 3].parse().ok()?;
                if from_status(n).is_some() {
                    return Some(n);
                }
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    None
}

/// The longest wait read from a provider's words: a year, longer than any
/// `max_wait` takes, short enough to add to any instant.
pub const LONGEST_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a rate-limit message asks to wait: `retry-after: 30`, `retry
/// after 30s`, `try again in 1m30s`, `"retryDelay": "30s"`.
fn wait_in(t: &str) -> Option<Duration> {
    const LEADS: &[&str] = &[
        "retry-after:",
        "retry-after",
        "retry after",
        "try again in",
        "\"retrydelay\":",
        "retrydelay:",
        "retry in",
    ];
    for lead in LEADS {
        if let Some(at) = t.find(lead) {
            let rest = t[at + lead.len()..].trim_start_matches([' ', '"', ':']);
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            if let Ok(secs) = word.parse::<f64>()
                && secs.is_finite()
                && secs >= 0.0
            {
                // `retry-after: 1e30` is a wait past any policy's max_wait,
                // not a panic: held to the longest a provider may ask.
                return Some(
                    Duration::try_from_secs_f64(secs)
                        .unwrap_or(LONGEST_WAIT)
                        .min(LONGEST_WAIT),
                );
            }
            if let Ok(d) = humantime::parse_duration(word.trim_end_matches('.')) {
                return Some(d);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(t: &str) -> Option<&'static str> {
        classify(t).map(|c| c.category)
    }

    #[test]
    fn what_the_real_clis_print_reads_as_its_cause() {
        // Each line is from a capture of the real CLI (tests/realcli).
        let cases = [
            // codex 0.171
            (
                "unexpected status 401 Unauthorized: Incorrect API key provided: fake.",
                cause::AUTH,
            ),
            (
                "exceeded retry limit, last status: 429 Too Many Requests, request id: req_a4",
                cause::RATE_LIMIT,
            ),
            (
                "unexpected status 503 Service Unavailable: The server is overloaded or not ready yet.",
                cause::OVERLOADED,
            ),
            (
                "We’re currently experiencing high demand, which may cause temporary errors.",
                cause::OVERLOADED,
            ),
            (
                "stream disconnected before completion: Transport error: network error: error decoding response body",
                cause::SERVER_ERROR,
            ),
            // claude 2.1
            ("Invalid API key · Fix external API key", cause::AUTH),
            (
                "API Error: Request rejected (429) · This request would exceed the rate limit",
                cause::RATE_LIMIT,
            ),
            (
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary",
                cause::OVERLOADED,
            ),
            (
                "API Error: 500 Internal server error. This is a server-side issue",
                cause::SERVER_ERROR,
            ),
            (
                "API Error: Connection to the API was lost (ECONNRESET). This is usually temporary",
                cause::SERVER_ERROR,
            ),
            (
                "API Error: Unable to connect to API (EAI_AGAIN)",
                cause::NETWORK,
            ),
            (
                "error_max_turns: Reached maximum number of turns (2)",
                cause::TURN_LIMIT,
            ),
            // gemini 0.61
            (
                "[API Error: {\"error\":{\"code\":401,\"message\":\"API key not valid.\",\"status\":\"UNAUTHENTICATED\"}}]",
                cause::AUTH,
            ),
            (
                "[API Error: Resource has been exhausted (e.g. check quota).]",
                cause::RATE_LIMIT,
            ),
            (
                "[API Error: The model is overloaded. Please try again later.]",
                cause::OVERLOADED,
            ),
            (
                "[API Error: {\"error\":{\"code\":500,\"message\":\"Internal error encountered.\",\"status\":\"INTERNAL\"}}]",
                cause::SERVER_ERROR,
            ),
            (
                "[API Error: Incomplete JSON segment at the end]",
                cause::SERVER_ERROR,
            ),
            // opencode 1.18
            (
                "The server had an error while processing your request. Sorry about that!",
                cause::SERVER_ERROR,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(cat(text), Some(want), "{text}");
        }
    }

    #[test]
    fn numbers_that_are_not_statuses_and_plain_failures_are_no_cause() {
        for text in [
            "exited with code 1",
            "failed at line 401 of parser.rs",
            "wrote 500 files",
            "the tests failed",
            "error: 3 tests failed",
        ] {
            assert_eq!(cat(text), None, "{text}");
        }
    }

    #[test]
    fn a_rate_limit_says_how_long_to_wait_when_the_text_does() {
        let w = |t: &str| classify(t).and_then(|c| c.wait);
        assert_eq!(
            w("429 Too Many Requests; retry-after: 30"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            w("rate limit reached, please try again in 1m30s."),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            w("RESOURCE_EXHAUSTED \"retryDelay\": \"12s\""),
            Some(Duration::from_secs(12))
        );
        assert_eq!(w("rate limit reached"), None);
    }

    /// Issue 39: `retry-after: 1e30` panicked converting to a Duration.
    #[test]
    fn an_absurd_wait_is_the_longest_not_a_panic() {
        assert_eq!(wait_in("retry-after: 1e30"), Some(LONGEST_WAIT));
        assert_eq!(
            wait_in("retry-after: 864000"),
            Some(Duration::from_secs(864_000))
        );
    }
}
