//! The capacity pane's rows and an instance's words, derived from the
//! view model: the selection moves over these rows, actions check them,
//! and the pane draws them.

use super::*;
use crate::operator::words::short_time;
use crate::projection::Instance;
use crate::vocab::{InstanceState, Lifetime};
use std::collections::HashMap;

/// What one row of the pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapRow {
    /// A profile's title: its name, role and instances of `max_instances`.
    Profile(usize),
    /// An instance: its index in the view's instances.
    Instance(usize),
    WaitingTitle,
    /// An operation waiting for capacity (its node index).
    Waiting(u32),
    /// How many more wait than are listed.
    WaitingMore,
    ReleaseTitle,
    Released,
    /// An instance the last release kept: its index in `retained`.
    Retained(usize),
    /// A `[cluster]` run's workers: how many, their load.
    WorkersTitle,
    /// A worker: its index in the list last said.
    Worker(usize),
    /// Under the workers of a run without `[capacity]`.
    NoLimits,
}

/// The waiting operations listed one by one; a flood is summed up.
pub const WAITING_SHOWN: usize = 20;

impl App {
    /// The pane's rows in order: each profile with its instances (released
    /// ones are gone), what waits, the last release.
    pub fn capacity_rows(&self) -> Vec<CapRow> {
        let c = &self.vm.capacity;
        let facts = &self.vm.facts;
        let mut rows = Vec::new();
        if let Some((workers, _)) = &c.workers {
            rows.push(CapRow::WorkersTitle);
            rows.extend((0..workers.len()).map(CapRow::Worker));
            if !facts.capacity {
                rows.push(CapRow::NoLimits);
            }
        }
        if !facts.capacity {
            return rows;
        }
        // One pass over the instances, grouped by profile.
        let at: HashMap<&str, usize> = facts
            .profiles
            .iter()
            .enumerate()
            .map(|(k, p)| (&*p.name, k))
            .collect();
        let mut by_profile: Vec<Vec<usize>> = vec![Vec::new(); facts.profiles.len()];
        for (i, inst) in c.instances.values().enumerate() {
            if inst.state == InstanceState::Released {
                continue;
            }
            if let Some(&k) = at.get(&*inst.profile) {
                by_profile[k].push(i);
            }
        }
        for (k, insts) in by_profile.into_iter().enumerate() {
            rows.push(CapRow::Profile(k));
            rows.extend(insts.into_iter().map(CapRow::Instance));
        }
        if !c.waiting.is_empty() {
            rows.push(CapRow::WaitingTitle);
            rows.extend(
                c.waiting
                    .iter()
                    .take(WAITING_SHOWN)
                    .map(|&ix| CapRow::Waiting(ix)),
            );
            if c.waiting.len() > WAITING_SHOWN {
                rows.push(CapRow::WaitingMore);
            }
        }
        if let Some(r) = &c.last_release {
            rows.push(CapRow::ReleaseTitle);
            rows.push(CapRow::Released);
            rows.extend((0..r.retained.len()).map(CapRow::Retained));
        }
        rows
    }

    /// Whether instances of `profile` are pinned (long-lived).
    fn pinned(&self, profile: &str) -> bool {
        self.vm
            .facts
            .profiles
            .iter()
            .any(|p| &*p.name == profile && p.pinned)
    }

    /// Why the release that is due (`x`, a round's end) leaves this instance
    /// when idle: it is pinned, or its lifetime is not due yet. `None`: such
    /// a release takes it.
    pub fn kept_by(&self, i: &Instance) -> Option<&'static str> {
        if self.pinned(&i.profile) {
            return Some("pinned");
        }
        match i.lifetime {
            Lifetime::CurrentRound => None,
            Lifetime::CurrentLoop if self.vm.run.finished.is_some() => None,
            other => Some(other.as_str()),
        }
    }

    /// How long it has been in its state, as the lanes say times.
    pub fn state_age(&self, i: &Instance) -> String {
        short_time(self.clock - i.since)
    }

    /// An instance's state in words: `busy: plan-api`, `idle 2m05 —
    /// releasable`, `idle 12s — kept: manual_release`.
    pub fn state_words(&self, i: &Instance) -> String {
        let op = i.op.as_deref();
        match i.state {
            InstanceState::Busy => match op {
                Some(o) => format!("busy: {o}"),
                None => "busy".into(),
            },
            // A release found it working: it stays until it is idle.
            InstanceState::Retained => match op {
                Some(o) => format!("busy: {o} · retained"),
                None => "busy · retained".into(),
            },
            InstanceState::Ready => {
                let why = match self.kept_by(i) {
                    None => "releasable".to_string(),
                    Some(k) => format!("kept: {k}"),
                };
                format!("idle {} — {why}", self.state_age(i))
            }
            InstanceState::Starting => "starting: its worktree is being added".into(),
            InstanceState::Planned => "planned, not started".into(),
            InstanceState::Failed => "failed to start".into(),
            InstanceState::Released => "released".into(),
        }
    }

    /// Lines above the rows: the nodes gauge, with `[capacity]`.
    pub fn capacity_gauge_rows(&self) -> u16 {
        u16::from(self.vm.facts.capacity)
    }
}
