//! Ensuring instances of profiles ahead of work (the capacity contract's
//! `ensure`), and waiting until they can take it.

use super::*;

impl Reconciler {
    /// Ensures each named profile has `count` instances of the lifetime
    /// asked for (default: the profile's), following its reuse policy:
    /// `prefer_idle` and `pinned` count every such instance, `always_new`
    /// only those no operation has used yet. What fits is created; each
    /// profile that cannot get everything is listed in `rejected` with the
    /// reason, and the answer is `partial`. Unknown or repeated profiles
    /// are errors, and nothing is created.
    /// [`ensure`](Self::ensure), then waits up to `bound` for what it
    /// returned to leave `starting` (a git worktree takes a moment): the
    /// answer holds ready targets, or is `partial` naming the instances
    /// still starting — never `ok` over instances that cannot take work.
    pub async fn ensure_ready(
        &self,
        wanted: &[(String, u32)],
        lifetime: Option<Lifetime>,
        bound: std::time::Duration,
    ) -> Result<EnsureResult, CapacityError> {
        let mut res = self.ensure(wanted, lifetime)?;
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let now: HashMap<String, InstanceState> = self
                .status()
                .agents
                .into_iter()
                .map(|a| (a.name, a.state))
                .collect();
            for a in &mut res.agents {
                if let Some(s) = now.get(&a.name) {
                    a.state = *s;
                }
            }
            let starting: Vec<String> = res
                .agents
                .iter()
                .filter(|a| matches!(a.state, InstanceState::Planned | InstanceState::Starting))
                .map(|a| a.name.clone())
                .collect();
            let failed = res.agents.iter().any(|a| a.state == InstanceState::Failed);
            if starting.is_empty() || tokio::time::Instant::now() >= deadline {
                if !starting.is_empty() || failed {
                    res.status = Outcome::Partial;
                }
                res.starting = starting;
                return Ok(res);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub fn ensure(
        &self,
        wanted: &[(String, u32)],
        lifetime: Option<Lifetime>,
    ) -> Result<EnsureResult, CapacityError> {
        let mut seen = HashSet::new();
        let mut asked: Vec<(&RoleProfile, u32)> = Vec::new();
        for (name, count) in wanted {
            if !seen.insert(name.as_str()) {
                return Err(CapacityError::new(
                    "duplicate_profile",
                    format!("profile {name:?} is given twice"),
                ));
            }
            let Some(p) = self.cfg.profiles.get(name) else {
                let names: Vec<&str> = self.cfg.profiles.keys().map(String::as_str).collect();
                return Err(CapacityError::new(
                    "unknown_profile",
                    format!(
                        "no role profile {name:?}; configured profiles: {}",
                        names.join(", ")
                    ),
                ));
            };
            asked.push((p, *count));
        }
        let mut st = self.lock();
        if st.finished {
            return Err(CapacityError::new(
                "not_live",
                "the run has finished; ensure needs a live run",
            ));
        }
        let mut events = Vec::new();
        self.declare(&mut st, &mut events);
        let mut agents = Vec::new();
        let mut rejected = Vec::new();
        for (p, count) in asked {
            let life = lifetime.unwrap_or_else(|| self.cfg.lifetime_of(p));
            let reuse = self.cfg.reuse_of(p);
            let counted: Vec<usize> = (0..st.recs.len())
                .filter(|&i| {
                    let r = &st.recs[i];
                    r.profile == p.name
                        && r.state.is_active()
                        && r.lifetime == life
                        && (reuse != Reuse::AlwaysNew || st.rt[i].served == 0)
                })
                .take(count as usize)
                .collect();
            let mut need = count as usize - counted.len();
            let mut reject: Option<(RejectReason, String)> = None;
            let mut cut = |need: &mut usize, room: usize, reason: RejectReason, detail: String| {
                if *need > room {
                    *need = room;
                    reject.get_or_insert((reason, detail));
                }
            };
            if let Some(err) = st.broken.get(&p.name) {
                cut(
                    &mut need,
                    0,
                    RejectReason::ProfileBroken,
                    format!("profile {} cannot start instances: {err}", p.name),
                );
            }
            let active = Self::active(&st, Some(&p.name));
            if reuse == Reuse::Pinned && p.pinned > 0 {
                cut(
                    &mut need,
                    (p.pinned as usize).saturating_sub(active),
                    RejectReason::Pinned,
                    format!(
                        "profile {} is pinned to its {} declared instance(s) (pinned = {}), {active} active",
                        p.name, p.pinned, p.pinned
                    ),
                );
            }
            cut(
                &mut need,
                (p.max_instances as usize).saturating_sub(active),
                RejectReason::OverMaxInstances,
                format!(
                    "profile {} allows max_instances {} and has {active} active; asked for {count} {life}",
                    p.name, p.max_instances
                ),
            );
            let nodes = Self::active(&st, None);
            cut(
                &mut need,
                (self.cfg.max_nodes as usize).saturating_sub(nodes),
                RejectReason::OverMaxNodes,
                format!(
                    "max_nodes is {} and {nodes} instance(s) are active",
                    self.cfg.max_nodes
                ),
            );
            for &i in &counted {
                let mut r = st.recs[i].clone();
                r.source = Source::Reused;
                agents.push(r);
            }
            for _ in 0..need {
                let i = self.create(&mut st, p, Some(life), &mut events);
                let mut r = st.recs[i].clone();
                r.source = Source::Created;
                agents.push(r);
            }
            if let Some((reason, detail)) = reject {
                rejected.push(Rejected {
                    profile: p.name.clone(),
                    requested: count,
                    granted: (counted.len() + need) as u32,
                    reason,
                    detail,
                });
            }
        }
        let status = if rejected.is_empty() {
            Outcome::Ok
        } else {
            Outcome::Partial
        };
        let detail = json!({
            "profiles": wanted.iter().map(|(n, c)| json!({"profile": n, "count": c})).collect::<Vec<_>>(),
            "lifetime": lifetime.map(|l| l.as_str()),
            "status": status,
            "rejected": rejected,
        });
        push_request(&mut st, "ensure", detail);
        self.persist_now(&st, events);
        drop(st);
        self.changed();
        Ok(EnsureResult {
            status,
            loop_id: self.loop_id.to_string(),
            capacity_ref: self.capacity_ref.clone(),
            agents,
            rejected,
            starting: Vec::new(),
        })
    }
}
