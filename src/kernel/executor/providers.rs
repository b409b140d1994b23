//! Provider holds: one rate limit or one refused key is the provider's
//! answer for every operation on that agent, so the next ones are not
//! started only to fail the same way. A rate limit holds the agent's work
//! until the reset time (or the retry's wait); an authentication failure
//! holds it until the operator has fixed the credentials and resumes.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use petgraph::stable_graph::NodeIndex;
use tokio::time::Instant;

use super::super::retry::cause;
use super::super::signal::SignalKind;
use super::Executor;

impl Executor {
    /// After a failed attempt of `ix` with `category`: holds its agent's
    /// work when the provider said no for all of it. `wait`: how long (a
    /// rate limit's reset, or the retry's backoff).
    pub(super) fn hold_provider(
        &mut self,
        ix: NodeIndex,
        category: &str,
        message: &str,
        wait: Option<Duration>,
    ) {
        let agent = self.graph[ix].op.metadata.agent.clone();
        let until = match category {
            // A refused key waits for the operator (a resume takes it as
            // fixed) — at most the policy's max_wait, which `wait` is.
            cause::RATE_LIMIT | cause::AUTH => match wait {
                Some(w) => Some(Instant::now() + w),
                None => return,
            },
            _ => return,
        };
        // A later reset wins over an earlier one; an indefinite hold stays.
        if let Some(prev) = self.provider_holds.get(&agent)
            && prev.is_none_or(|p| until.is_some_and(|u| u <= p))
        {
            return;
        }
        self.provider_holds.insert(agent.clone(), until);
        if category == cause::AUTH {
            self.provider_refused
                .push((agent.clone(), Arc::from(message)));
        }
        let until_unix = wait.and_then(|w| {
            SystemTime::now()
                .checked_add(w)?
                .duration_since(UNIX_EPOCH)
                .ok()
                .map(|d| d.as_millis() as u64)
        });
        self.bus.emit(SignalKind::ProviderHeld {
            agent,
            category: Arc::from(category),
            until: until_unix,
            message: Arc::from(message),
        });
    }

    /// Whether a provider hold keeps `ix` from starting now; if so it waits
    /// with the agent's other held work.
    pub(super) fn held_by_provider(&mut self, ix: NodeIndex) -> bool {
        if self.provider_holds.is_empty() {
            return false;
        }
        let agent = &self.graph[ix].op.metadata.agent;
        match self.provider_holds.get(agent) {
            Some(None) => {}
            Some(Some(until)) if *until > Instant::now() => {}
            _ => return false,
        }
        if let Some(f) = self.refused_for_nobody(ix) {
            self.fail(ix, f);
            return true;
        }
        self.provider_wait.push(ix);
        true
    }

    /// Why `ix` ends now rather than wait: its agent's key was refused and
    /// nobody is there to fix it and resume (an unattended run: its gates
    /// are denied the same way).
    fn refused_for_nobody(&self, ix: NodeIndex) -> Option<super::super::agent::AgentFailure> {
        use super::super::control::ApprovalPolicy;
        let ApprovalPolicy::DenyAll { reason } = &self.cfg.approvals else {
            return None;
        };
        let agent = &self.graph[ix].op.metadata.agent;
        let (_, said) = self.provider_refused.iter().find(|(a, _)| a == agent)?;
        Some(super::super::agent::AgentFailure::new(
            cause::AUTH,
            format!(
                "not started: agent {agent}'s key was refused ({said}), and nobody can fix it and resume ({reason})"
            ),
        ))
    }

    /// With nobody left to fix a refused key, the work held on it ends.
    pub(super) fn end_refused_holds(&mut self) {
        let waiting = std::mem::take(&mut self.provider_wait);
        for ix in waiting {
            match self.refused_for_nobody(ix) {
                Some(f) => self.fail(ix, f),
                None => self.provider_wait.push(ix),
            }
        }
    }

    /// The soonest rate-limit hold to end, if one is timed.
    pub(super) fn next_provider_release(&self) -> Option<Instant> {
        self.provider_holds.values().flatten().min().copied()
    }

    /// Ends the holds that are over (`all`: the operator resumed, so a held
    /// key is taken as fixed too) and lets their work go on, in order.
    pub(super) fn release_providers(&mut self, all: bool) {
        let now = Instant::now();
        let over: Vec<Arc<str>> = self
            .provider_holds
            .iter()
            .filter(|(_, until)| all || until.is_some_and(|u| u <= now))
            .map(|(a, _)| a.clone())
            .collect();
        if over.is_empty() {
            return;
        }
        for agent in &over {
            self.provider_holds.remove(agent);
            self.provider_refused.retain(|(a, _)| a != agent);
            self.bus.emit(SignalKind::ProviderReleased {
                agent: agent.clone(),
            });
        }
        let waiting = std::mem::take(&mut self.provider_wait);
        for ix in waiting.into_iter().rev() {
            self.sched.ready.push_front(ix);
        }
        self.round_active = true;
    }
}
