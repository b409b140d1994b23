//! The retry policy: which failed attempts come back by themselves, and
//! after how long. A failure carries its cause (the same words for every
//! agent CLI, [`cause`]); the policy retries only the causes it names —
//! by default those a provider says are passing (rate limits, overload,
//! server and network errors) — up to a number of attempts, waiting the
//! provider's reset time when it gave one and otherwise backing off
//! exponentially with jitter. Authentication failures and turn or budget
//! limits are never worth a second attempt: the operator has to act.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::agent::AgentFailure;

/// Failure causes, the same for every agent CLI. Other categories exist
/// (`binary_not_found`, `invalid_toolset`, `simulated`, ...); these are the
/// ones a provider or a process tells.
pub mod cause {
    /// The provider refused the credentials: not retried; the operator acts.
    pub const AUTH: &str = "auth";
    /// Too many requests; the provider may say until when.
    pub const RATE_LIMIT: &str = "rate_limit";
    /// The provider is overloaded (HTTP 529 / 503): passing.
    pub const OVERLOADED: &str = "overloaded";
    /// The provider failed (HTTP 5xx, a stream cut mid-answer): passing.
    pub const SERVER_ERROR: &str = "server_error";
    /// The provider could not be reached.
    pub const NETWORK: &str = "network";
    /// The CLI's own turn limit ended the attempt.
    pub const TURN_LIMIT: &str = "turn_limit";
    /// The CLI's own spend limit ended the attempt.
    pub const BUDGET_LIMIT: &str = "budget_limit";
    /// The process exited non-zero, or was killed, without a cause above.
    pub const AGENT_CRASH: &str = "agent_crash";
    /// No output for `stall_timeout`.
    pub const STALL: &str = "stall_timeout";
    /// Longer than `max_runtime`.
    pub const TIMEOUT: &str = "timeout";
    /// The worker performing the attempt (scale-out) went quiet past its
    /// ack deadline: killed, stopped or cut off.
    pub const WORKER_LOST: &str = "worker_lost";
    /// Its work clashed with what landed before it, and nobody resolved
    /// it then (not a cause a policy retries: the operator resolves it
    /// by hand, and `resolve` lands it without its agent).
    pub const MERGE_CONFLICT: &str = "merge_conflict";

    /// Every cause a policy's `on` list may name.
    pub const ALL: [&str; 11] = [
        AUTH,
        RATE_LIMIT,
        OVERLOADED,
        SERVER_ERROR,
        NETWORK,
        TURN_LIMIT,
        BUDGET_LIMIT,
        AGENT_CRASH,
        STALL,
        TIMEOUT,
        WORKER_LOST,
    ];

    /// What the operator reads for a cause (`failure` for a category
    /// that is not one).
    pub fn words(category: &str) -> &'static str {
        match category {
            AUTH => "authentication failed",
            RATE_LIMIT => "rate limit",
            OVERLOADED => "provider overloaded",
            SERVER_ERROR => "provider error",
            NETWORK => "provider unreachable",
            TURN_LIMIT => "turn limit",
            BUDGET_LIMIT => "budget limit",
            AGENT_CRASH => "agent crashed",
            STALL => "stalled",
            TIMEOUT => "timed out",
            WORKER_LOST => "worker lost",
            _ => "failure",
        }
    }
}

/// When a failed attempt is tried again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: never retried).
    pub attempts: u32,
    /// The first wait without a reset time; it doubles per retry.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// The longest reset time waited for; a provider that asks for longer
    /// fails the operation (the operator decides).
    pub max_wait: Duration,
    /// The causes retried.
    pub on: Vec<Arc<str>>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(60),
            max_wait: Duration::from_secs(15 * 60),
            on: [
                cause::RATE_LIMIT,
                cause::OVERLOADED,
                cause::SERVER_ERROR,
                cause::NETWORK,
                cause::WORKER_LOST,
            ]
            .into_iter()
            .map(Arc::from)
            .collect(),
        }
    }
}

/// What the policy decided about a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Try again after this long.
    Retry(Duration),
    /// Final; `why` says why it was not retried when the cause is one the
    /// policy retries (out of attempts, a reset too far away).
    Fail { why: Option<String> },
}

impl RetryPolicy {
    /// The decision for an attempt that failed with `f`, after `attempts`
    /// attempts of the operation in this series. `seed` spreads the jitter
    /// of operations that failed together (their identity and attempt), so
    /// they do not all come back at the same instant.
    pub fn decide(&self, f: &AgentFailure, attempts: u32, seed: u64) -> Decision {
        if !self.on.iter().any(|c| **c == *f.category) {
            return Decision::Fail { why: None };
        }
        if attempts >= self.attempts {
            return Decision::Fail {
                why: Some(format!(
                    "{} after {attempts} attempt{}",
                    cause::words(&f.category),
                    if attempts == 1 { "" } else { "s" }
                )),
            };
        }
        if let Some(wait) = f.wait {
            if wait > self.max_wait {
                return Decision::Fail {
                    why: Some(format!(
                        "{}: the provider asks to wait {}, longer than max_wait {}",
                        cause::words(&f.category),
                        humantime::format_duration(Duration::from_secs(wait.as_secs())),
                        humantime::format_duration(self.max_wait),
                    )),
                };
            }
            // A reset time is the provider's word: waited to the letter.
            return Decision::Retry(wait);
        }
        let exp = attempts.saturating_sub(1).min(30);
        let full = self.backoff.saturating_mul(1 << exp).min(self.max_backoff);
        // Equal jitter: half fixed, half spread, so a retry never comes
        // back at once and a burst of failures does not return as one.
        let spread = (splitmix(seed) >> 11) as f64 / (1u64 << 53) as f64;
        Decision::Retry(full.mul_f64(0.5 + 0.5 * spread))
    }
}

/// A scheduled retry in words: `rate limit — attempt 2 of 3 at 14:05:03`
/// (UTC, as the runs list gives times).
pub fn waiting_words(category: &str, until_ms: u64, next: u32, of: u32) -> String {
    format!(
        "{} — attempt {next} of {of} at {}",
        cause::words(category),
        clock(until_ms)
    )
}

/// `14:05:03` (UTC) of a Unix time in milliseconds.
pub fn clock(unix_ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(unix_ms);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    // 2026-12-02T14:05:03Z
    s.get(11..19).unwrap_or("?").to_string()
}

/// A well-mixed 64-bit hash of `x` (SplitMix64's finaliser).
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A policy as a play writes it: what it leaves out comes from the policy
/// it is laid over (the built-in one under `[retry]`, the play's under an
/// agent's `retry`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetrySettings {
    pub attempts: Option<u32>,
    pub backoff: Option<Duration>,
    pub max_backoff: Option<Duration>,
    pub max_wait: Option<Duration>,
    pub on: Option<Vec<Arc<str>>>,
}

impl RetrySettings {
    pub fn over(&self, base: &RetryPolicy) -> RetryPolicy {
        RetryPolicy {
            attempts: self.attempts.unwrap_or(base.attempts),
            backoff: self.backoff.unwrap_or(base.backoff),
            max_backoff: self.max_backoff.unwrap_or(base.max_backoff),
            max_wait: self.max_wait.unwrap_or(base.max_wait),
            on: self.on.clone().unwrap_or_else(|| base.on.clone()),
        }
    }
}

/// The run's policy, and the agents' own where they set one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetryPolicies {
    pub default: RetryPolicy,
    pub by_agent: HashMap<String, RetryPolicy>,
}

impl RetryPolicies {
    pub fn for_agent(&self, agent: &str) -> &RetryPolicy {
        self.by_agent.get(agent).unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(category: &str) -> AgentFailure {
        AgentFailure::new(category, "x")
    }

    #[test]
    fn only_the_named_causes_come_back_and_only_while_attempts_remain() {
        let p = RetryPolicy::default();
        for c in [
            cause::AUTH,
            cause::TURN_LIMIT,
            cause::AGENT_CRASH,
            "simulated",
        ] {
            assert_eq!(
                p.decide(&failure(c), 1, 0),
                Decision::Fail { why: None },
                "{c}"
            );
        }
        assert!(matches!(
            p.decide(&failure(cause::OVERLOADED), 2, 0),
            Decision::Retry(_)
        ));
        assert_eq!(
            p.decide(&failure(cause::OVERLOADED), 3, 0),
            Decision::Fail {
                why: Some("provider overloaded after 3 attempts".into())
            }
        );
    }

    #[test]
    fn backoff_doubles_within_its_jitter_and_stops_at_the_cap() {
        let p = RetryPolicy {
            attempts: 20,
            ..RetryPolicy::default()
        };
        let f = failure(cause::SERVER_ERROR);
        for (attempts, full) in [(1u32, 2u64), (2, 4), (3, 8), (6, 60), (12, 60)] {
            for seed in 0..50 {
                let Decision::Retry(d) = p.decide(&f, attempts, seed) else {
                    panic!("retried")
                };
                let full = Duration::from_secs(full);
                assert!(d >= full / 2 && d <= full, "{attempts}: {d:?} of {full:?}");
            }
        }
        let spread: std::collections::HashSet<_> = (0..20)
            .map(|seed| p.decide(&f, 1, seed))
            .map(|d| format!("{d:?}"))
            .collect();
        assert!(spread.len() > 10, "operations failing together spread out");
    }

    #[test]
    fn a_reset_time_is_waited_to_the_letter_unless_it_is_too_far() {
        let p = RetryPolicy::default();
        let f = failure(cause::RATE_LIMIT).with_wait(Some(Duration::from_secs(30)));
        assert_eq!(p.decide(&f, 1, 7), Decision::Retry(Duration::from_secs(30)));
        let far = failure(cause::RATE_LIMIT).with_wait(Some(Duration::from_secs(3600)));
        assert_eq!(
            p.decide(&far, 1, 7),
            Decision::Fail {
                why: Some(
                    "rate limit: the provider asks to wait 1h, longer than max_wait 15m".into()
                )
            }
        );
    }
}
