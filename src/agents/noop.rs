//! An agent that returns at once: the benchmark baseline.

use serde_json::Value;

use crate::kernel::{Agent, AgentOutcome, BoxFuture, Invocation};

#[derive(Debug, Default, Clone, Copy)]
pub struct NoopAgent;

impl Agent for NoopAgent {
    fn invoke(&self, _inv: Invocation) -> BoxFuture<AgentOutcome> {
        Box::pin(std::future::ready(Ok(Value::Null)))
    }

    fn wants_context(&self) -> bool {
        false
    }
}
