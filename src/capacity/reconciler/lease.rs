//! The lease seam's side of the reconciler: which instance an operation
//! gets, whether it waits (and why), or whether capacity can never serve
//! it; reclaiming an idle instance of another profile for a node.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Blocked, CapState, Reconciler};
use crate::capacity::config::{Lifetime, Reuse, RoleProfile};
use crate::capacity::state::{InstanceState, Selection, UNCOMMITTED_CHANGES, now};
use crate::kernel::{Lease, LeaseAnswer, LeaseId, LeaseProvider, LeaseRequest};

impl Reconciler {
    /// Decides a lease for `req` of profile `p`, with the state locked.
    fn decide(&self, st: &mut CapState, p: &RoleProfile, req: &LeaseRequest<'_>) -> Decision {
        let mut events = Vec::new();
        self.declare(st, &mut events);
        let decision = self.decide_inner(st, p, req, &mut events);
        if !events.is_empty() {
            self.persist_now(st, events);
        }
        decision
    }

    fn decide_inner(
        &self,
        st: &mut CapState,
        p: &RoleProfile,
        req: &LeaseRequest<'_>,
        events: &mut Vec<Value>,
    ) -> Decision {
        let policy = self.cfg.reuse_of(p);
        let idle = (0..st.recs.len()).find(|&i| {
            st.recs[i].profile == p.name
                && st.recs[i].state == InstanceState::Ready
                && !st.rt[i].leaving
        });
        let creatable = self.can_create(st, p);
        let prefer_new = policy == Reuse::AlwaysNew && creatable.is_ok();
        if let Some(i) = idle
            && !prefer_new
        {
            return Decision::Grant(self.grant(st, i, req.name, events));
        }
        let has_active = Self::active(st, Some(&p.name)) > 0;
        if policy == Reuse::Pinned {
            if has_active {
                return Decision::Wait(format!(
                    "capacity: profile {} is pinned and every instance of it is busy",
                    p.name
                ));
            }
            return Decision::Unavailable(format!(
                "capacity: profile {0} is pinned and has no instance; declare them (pinned = N in [role_profiles.{0}]) or create one with `playdeck capacity ensure --run RUN --profile {0}` before its operations start",
                p.name
            ));
        }
        // Create only as many instances as there are operations waiting.
        let starting = st
            .recs
            .iter()
            .filter(|r| r.profile == p.name && r.state == InstanceState::Starting)
            .count();
        let demand = st.waiting.get(&p.name).copied().unwrap_or(0) + usize::from(!req.queued);
        if starting > 0 && starting >= demand {
            return Decision::Wait(format!(
                "capacity: an instance of profile {} is starting",
                p.name
            ));
        }
        match creatable {
            Ok(()) => {
                let i = self.create(st, p, None, events);
                if st.recs[i].state == InstanceState::Ready {
                    Decision::Grant(self.grant(st, i, req.name, events))
                } else {
                    Decision::Wait(format!("capacity: starting instance {}", st.recs[i].name))
                }
            }
            // Its own instances work or start: one comes back.
            Err(b @ Blocked::MaxInstances) => Decision::Wait(self.blocked_reason(&b, p)),
            Err(b @ Blocked::Broken(_)) if has_active => Decision::Wait(self.blocked_reason(&b, p)),
            Err(b @ Blocked::Broken(_)) => Decision::Unavailable(self.blocked_reason(&b, p)),
            Err(b @ Blocked::MaxNodes) => {
                if let Some(name) = self.reclaimable(st, &p.name) {
                    return Decision::Reclaim(name);
                }
                let changing = (0..st.recs.len()).any(|i| {
                    matches!(
                        st.recs[i].state,
                        InstanceState::Busy | InstanceState::Retained | InstanceState::Starting
                    ) || st.rt[i].leaving
                });
                if changing {
                    return Decision::Wait(self.blocked_reason(&b, p));
                }
                let holders: Vec<String> = st
                    .recs
                    .iter()
                    .filter(|r| r.state.is_active())
                    .map(|r| {
                        let why = if r.pinned {
                            "pinned".to_string()
                        } else if r
                            .retained
                            .as_ref()
                            .is_some_and(|x| x.reason == UNCOMMITTED_CHANGES)
                        {
                            UNCOMMITTED_CHANGES.to_string()
                        } else {
                            r.lifetime.to_string()
                        };
                        format!("{} ({why})", r.name)
                    })
                    .collect();
                Decision::Unavailable(format!(
                    "capacity: max_nodes {} is held by idle instances no operation may reclaim: {}; release one (`playdeck ctl RUN release --name INSTANCE`) or raise max_nodes",
                    self.cfg.max_nodes,
                    holders.join(", ")
                ))
            }
        }
    }

    /// An idle instance of another profile that may go so `profile` gets a
    /// node: round-scoped first, then loop-scoped; never a pinned or
    /// `manual_release` one, nor one kept for uncommitted work.
    fn reclaimable(&self, st: &CapState, profile: &str) -> Option<String> {
        [Lifetime::CurrentRound, Lifetime::CurrentLoop]
            .into_iter()
            .find_map(|life| {
                (0..st.recs.len()).find(|&i| {
                    let r = &st.recs[i];
                    r.profile != profile
                        && r.state == InstanceState::Ready
                        && r.lifetime == life
                        && !r.pinned
                        && !st.rt[i].leaving
                        && r.retained
                            .as_ref()
                            .is_none_or(|x| x.reason != UNCOMMITTED_CHANGES)
                })
            })
            .map(|i| st.recs[i].name.clone())
    }
}

/// A lease decision.
enum Decision {
    Grant(Lease),
    Wait(String),
    Unavailable(String),
    /// Release this idle instance of another profile, then decide again.
    Reclaim(String),
}

impl LeaseProvider for Reconciler {
    fn acquire(&self, req: &LeaseRequest<'_>) -> LeaseAnswer {
        let Some(p) = self.cfg.profile_for(req.role, req.profile) else {
            return LeaseAnswer::NotManaged;
        };
        let queue: Arc<str> = Arc::from(p.name.as_str());
        // Each reclaim frees a node or leaves an instance kept for its
        // work (which is then not reclaimable): bounded by the instances.
        loop {
            let decision = {
                let mut st = self.lock();
                self.decide(&mut st, p, req)
            };
            match decision {
                Decision::Grant(lease) => return LeaseAnswer::Granted(lease),
                Decision::Wait(reason) => {
                    return LeaseAnswer::Wait {
                        queue,
                        reason: Arc::from(reason),
                    };
                }
                Decision::Unavailable(reason) => {
                    return LeaseAnswer::Unavailable {
                        reason: Arc::from(reason),
                    };
                }
                Decision::Reclaim(name) => {
                    let sel = Selection::new(&[], std::slice::from_ref(&name), &[]);
                    let r = self.release_selected(&sel, "reclaim", false);
                    tracing::debug!(
                        "reclaimed {name} for profile {}: released {:?}, kept {:?}",
                        p.name,
                        r.released,
                        r.retained
                    );
                }
            }
        }
    }

    fn release(&self, lease: LeaseId) {
        let mut st = self.lock();
        let Some(i) = st.rt.iter().position(|r| r.lease == Some(lease)) else {
            return;
        };
        st.rt[i].lease = None;
        let r = &mut st.recs[i];
        r.op = None;
        if matches!(r.state, InstanceState::Busy | InstanceState::Retained) {
            r.state = InstanceState::Ready;
        }
        r.updated_at = now();
        let ev = self.announce(&st, i);
        self.persist_now(&st, vec![ev]);
    }

    fn queue_depth(&self, queue: &str, depth: usize) {
        self.lock().waiting.insert(queue.to_string(), depth);
    }

    fn pending(&self) -> bool {
        self.lock()
            .recs
            .iter()
            .any(|r| r.state == InstanceState::Starting)
    }

    fn round_ended(&self, _round: u32) {
        let sel = Selection::new(&[], &[], &[Lifetime::CurrentRound]);
        self.release_selected(&sel, "round_end", false);
    }

    fn run_finished(&self) {
        let sel = Selection::new(&[], &[], &[Lifetime::CurrentRound, Lifetime::CurrentLoop]);
        self.release_selected(&sel, "run_end", true);
        let mut st = self.lock();
        st.finished = true;
        self.persist_now(&st, vec![json!({"at": now(), "event": "run_finished"})]);
    }
}
