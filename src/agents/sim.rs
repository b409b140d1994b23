//! The simulated agent: plays the behaviour written in the play (how long,
//! which outcome, what result, what it emits and when), scaled by the run's
//! speed. Deterministic: the same play under the same clock produces the
//! same stream.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::kernel::{Agent, AgentEvent, AgentFailure, AgentOutcome, BoxFuture, Invocation};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimOutcome {
    #[default]
    Succeed,
    Fail,
    Escalate,
}

impl SimOutcome {
    pub const ALLOWED: [&'static str; 3] = ["succeed", "fail", "escalate"];
}

/// A value the agent puts on its stream while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimEmit {
    /// When, in play milliseconds from the start; `None` is just before the
    /// result.
    pub at_ms: Option<u64>,
    /// The emitted value: `{ spawn_request = {...} }` or `{ escalation = ... }`.
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSpec {
    pub duration_ms: u64,
    pub outcome: SimOutcome,
    pub result: Option<Value>,
    pub context: Option<Map<String, Value>>,
    pub emits: Vec<SimEmit>,
    pub error: Option<String>,
    pub escalation: Option<String>,
    /// With `outcome = "fail"`: only the first N attempts fail (a retry
    /// after that succeeds). `None`: every attempt fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_attempts: Option<u32>,
    /// With `outcome = "fail"`: the cause it fails with (`rate_limit`,
    /// `overloaded`, ...: what the retry policy reads); `simulated` when
    /// none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// With a cause: the reset time the simulated provider gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// What the attempt used, reported when it ends (as a CLI reports its
    /// totals): for budgets in demos and tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::kernel::Usage>,
}

impl SimSpec {
    /// The behaviour of an operation the play says nothing about (spawned
    /// work, mostly): it succeeds after 0.6–2.4 s, derived from its
    /// instruction so the same play always takes the same time.
    pub fn default_for(instruction: &str) -> Self {
        SimSpec {
            duration_ms: 600 + fnv1a(instruction.as_bytes()) % 1800,
            outcome: SimOutcome::Succeed,
            result: None,
            context: None,
            emits: Vec::new(),
            error: None,
            escalation: None,
            fail_attempts: None,
            cause: None,
            retry_after_ms: None,
            usage: None,
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs [`SimSpec`]s. `speed` 2.0 plays everything twice as fast.
#[derive(Debug, Clone)]
pub struct SimAgent {
    speed: f64,
}

impl SimAgent {
    pub fn new(speed: f64) -> Self {
        assert!(speed.is_finite() && speed > 0.0, "speed must be positive");
        SimAgent { speed }
    }

    fn scaled(&self, ms: u64) -> Duration {
        Duration::from_micros(((ms as f64) * 1000.0 / self.speed).round() as u64)
    }
}

impl Agent for SimAgent {
    fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
        let spec = match &*inv.params {
            // Operations written for another agent (flag profiles, tools)
            // that a role profile moved onto sim play the default.
            v if v.get("duration_ms").is_none() => SimSpec::default_for(&inv.instruction),
            v => match serde_json::from_value::<SimSpec>(v.clone()) {
                Ok(s) => s,
                Err(e) => {
                    let f = AgentFailure::new("sim_spec", format!("invalid sim behaviour: {e}"));
                    return Box::pin(std::future::ready(Err(f)));
                }
            },
        };
        let total = self.scaled(spec.duration_ms);
        let mut emits: Vec<(Duration, Value)> = spec
            .emits
            .iter()
            .map(|e| {
                let at = e.at_ms.map_or(total, |ms| self.scaled(ms).min(total));
                (at, e.value.clone())
            })
            .collect();
        emits.sort_by_key(|(at, _)| *at);
        Box::pin(async move {
            let start = tokio::time::Instant::now();
            for (at, value) in emits {
                tokio::time::sleep_until(start + at).await;
                inv.events.emit(AgentEvent::Emitted(value));
            }
            tokio::time::sleep_until(start + total).await;
            if let Some(u) = &spec.usage {
                inv.events.emit(AgentEvent::Usage(*u));
            }
            outcome(&spec, &inv.name, inv.attempt)
        })
    }

    fn wants_context(&self) -> bool {
        false
    }
}

/// What attempt `attempt` of a simulated operation named `name` returns.
pub fn outcome(spec: &SimSpec, name: &str, attempt: u32) -> AgentOutcome {
    let fails = spec.fail_attempts.is_none_or(|n| attempt <= n);
    if spec.outcome == SimOutcome::Fail && fails {
        let msg = spec
            .error
            .clone()
            .unwrap_or_else(|| "simulated failure".into());
        let cause = spec.cause.as_deref().unwrap_or("simulated");
        let wait = spec.retry_after_ms.map(std::time::Duration::from_millis);
        return Err(AgentFailure::new(cause, msg).with_wait(wait));
    }
    let mut result = match spec.result.clone() {
        Some(Value::Object(m)) => m,
        Some(other) => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
        None => {
            let mut m = Map::new();
            m.insert("summary".into(), Value::String(format!("{name}: done")));
            m
        }
    };
    if let Some(ctx) = &spec.context {
        result.insert("context".into(), Value::Object(ctx.clone()));
    }
    if spec.outcome == SimOutcome::Escalate {
        let reason = spec
            .escalation
            .clone()
            .unwrap_or_else(|| "needs a human decision".into());
        result.insert("escalation".into(), json!({ "reason": reason }));
    }
    Ok(Value::Object(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::AgentEvents;
    use std::sync::Arc;

    fn inv(params: Value) -> Invocation {
        Invocation {
            op_id: uuid::Uuid::nil(),
            name: Arc::from("op"),
            role: None,
            instruction: Arc::from("write the tests"),
            params: Arc::new(params),
            context: Map::new(),
            attempt: 1,
            events: AgentEvents::detached(),
            instance: None,
            workspace: None,
            profile: None,
            usd_headroom: None,
            carry_on: None,
            land_only: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn duration_is_scaled_by_speed() {
        let spec = serde_json::to_value(SimSpec {
            duration_ms: 1000,
            ..SimSpec::default_for("")
        })
        .unwrap();
        let t0 = tokio::time::Instant::now();
        let out = SimAgent::new(4.0).invoke(inv(spec)).await.unwrap();
        assert_eq!(t0.elapsed(), Duration::from_millis(250));
        assert_eq!(out, json!({"summary": "op: done"}));
    }

    #[tokio::test(start_paused = true)]
    async fn outcomes() {
        let base = SimSpec::default_for("");
        let fail = SimSpec {
            outcome: SimOutcome::Fail,
            error: Some("boom".into()),
            ..base.clone()
        };
        let err = SimAgent::new(1.0)
            .invoke(inv(serde_json::to_value(fail).unwrap()))
            .await
            .unwrap_err();
        assert_eq!(
            (&*err.category, err.message.as_str()),
            ("simulated", "boom")
        );

        let esc = SimSpec {
            outcome: SimOutcome::Escalate,
            result: Some(json!({"verdict": "unsure"})),
            context: Some(json!({"k": 1}).as_object().unwrap().clone()),
            ..base
        };
        let out = SimAgent::new(1.0)
            .invoke(inv(serde_json::to_value(esc).unwrap()))
            .await
            .unwrap();
        assert_eq!(
            out,
            json!({"verdict": "unsure", "context": {"k": 1}, "escalation": {"reason": "needs a human decision"}})
        );
    }

    #[test]
    fn default_duration_is_deterministic_and_bounded() {
        let a = SimSpec::default_for("write docs").duration_ms;
        assert_eq!(a, SimSpec::default_for("write docs").duration_ms);
        assert!((600..2400).contains(&a));
    }
}
