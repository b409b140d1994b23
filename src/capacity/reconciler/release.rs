//! Releasing instances: idle-only, with the reason each kept one stays
//! (busy, starting, a worktree holding work), and the previews the
//! operator's confirmation and `release --dry-run` show.

use super::*;

impl Reconciler {
    /// Releases what `sel` takes, idle-only: busy and starting instances
    /// are kept with their reason, and so is the instance whose release
    /// would remove a worktree holding uncommitted work. With `later`
    /// (the run's end), a selected instance still starting goes as soon as
    /// its worktree is there.
    pub(super) fn release_selected(
        &self,
        sel: &Selection,
        trigger: &str,
        later: bool,
    ) -> ReleaseResult {
        let mut st = self.lock();
        let mut events = Vec::new();
        self.declare(&mut st, &mut events);
        let before: Vec<(InstanceState, bool)> = st
            .recs
            .iter()
            .map(|r| (r.state, r.retained.is_some()))
            .collect();
        let plan = plan_release(&st.recs, sel, |i, r| {
            if st.rt[i].leaving {
                return Standing::Leaving;
            }
            match r.state {
                InstanceState::Ready | InstanceState::Planned => Standing::Idle,
                InstanceState::Starting => Standing::Working("starting"),
                _ => Standing::Working("busy"),
            }
        });
        let waiting = st.waiting.clone();
        let depth = |p: &str| waiting.get(p).copied().unwrap_or(0);
        let mut retained = retain_working(&mut st.recs, &plan, depth);
        if later {
            for &(i, state) in &plan.working {
                if state == "starting" {
                    st.rt[i].release_when_ready = true;
                    if let Some(r) = st.recs[i].retained.as_mut() {
                        r.detail = Some("released as soon as its worktree is added".into());
                    }
                }
            }
            retained = plan
                .working
                .iter()
                .filter_map(|&(i, _)| {
                    let a = &st.recs[i];
                    let r = a.retained.as_ref()?;
                    Some(crate::capacity::state::RetainedEntry {
                        name: a.name.clone(),
                        reason: r.reason.clone(),
                        runtime_state: r.runtime_state.clone(),
                        queue_depth: r.queue_depth,
                        detail: r.detail.clone(),
                    })
                })
                .collect();
        }
        // `git status` of the worktrees this would remove, without the
        // lock: the instances concerned are leaving, so nobody leases them.
        let mut dirty = HashMap::new();
        if !plan.checks.is_empty() {
            for &i in &plan.idle {
                st.rt[i].leaving = true;
            }
            drop(st);
            for (path, _) in &plan.checks {
                if let Some(files) = workspace::uncommitted(path) {
                    dirty.insert(path.clone(), files);
                }
            }
            st = self.lock();
            for &i in &plan.idle {
                st.rt[i].leaving = false;
            }
        }
        let waiting = st.waiting.clone();
        let (released, kept) = settle_idle(&mut st.recs, &plan, &dirty, |p| {
            waiting.get(p).copied().unwrap_or(0)
        });
        retained.extend(kept);
        for (i, was) in before.into_iter().enumerate() {
            if was != (st.recs[i].state, st.recs[i].retained.is_some()) {
                events.push(self.announce(&st, i));
            }
            if was.0 != InstanceState::Released && st.recs[i].state == InstanceState::Released {
                self.free_workspace(&mut st, i);
            }
        }
        let result = ReleaseResult::new(sel, &self.loop_id, &self.capacity_ref, released, retained);
        self.emit(SignalKind::CapacityReleased {
            trigger: Arc::from(trigger),
            released: result
                .released
                .iter()
                .map(|n| Arc::from(n.as_str()))
                .collect(),
            retained: result
                .retained
                .iter()
                .map(|r| Retained {
                    name: Arc::from(r.name.as_str()),
                    reason: Arc::from(r.reason.as_str()),
                    runtime_state: Arc::from(r.runtime_state.as_str()),
                    queue_depth: r.queue_depth,
                })
                .collect(),
        });
        let detail = json!({
            "trigger": trigger,
            "lifetimes": result.lifetimes,
            "names": result.names,
            "status": result.status,
            "released": result.released,
            "retained": result.retained,
        });
        events.push(json!({"at": now(), "event": "release", "detail": detail}));
        push_request(&mut st, "release", detail);
        self.persist_now(&st, events);
        drop(st);
        self.changed();
        result
    }

    pub(super) fn free_workspace(&self, st: &mut CapState, i: usize) {
        let Some(key) = st.rt[i].group.take() else {
            return;
        };
        let done = match st.groups.get_mut(&key) {
            Some(g) => {
                g.refs = g.refs.saturating_sub(1);
                g.refs == 0
            }
            None => false,
        };
        if done
            && let Some(g) = st.groups.remove(&key)
            && let Some(repo) = self.cfg.repo_root.clone()
        {
            self.cleanup(repo, g.path, g.branch);
        }
    }

    /// The operator's release: instances of `lifetimes` and those named;
    /// with neither, the lifetimes due now (pinned and `manual_release`
    /// instances stay). A name the run does not have is an error. Runs
    /// `git status` for worktrees it would remove: call it off the async
    /// runtime, or use [`Reconciler::release_request`].
    pub fn release_select(
        &self,
        lifetimes: &[Lifetime],
        names: &[String],
    ) -> Result<ReleaseResult, CapacityError> {
        let sel = {
            let st = self.lock();
            let sel = Selection::new(lifetimes, names, &Self::due_now(&st));
            sel.check_names(&st.recs)?;
            sel
        };
        Ok(self.release_selected(&sel, "operator", false))
    }

    /// [`Reconciler::release_select`] on a blocking thread, for async
    /// callers.
    pub async fn release_request(
        &self,
        lifetimes: Vec<Lifetime>,
        names: Vec<String>,
    ) -> Result<ReleaseResult, CapacityError> {
        let me = self.me.upgrade().expect("the reconciler is alive");
        tokio::task::spawn_blocking(move || me.release_select(&lifetimes, &names))
            .await
            .unwrap_or_else(|e| Err(CapacityError::new("io", format!("the release failed: {e}"))))
    }

    /// What the operator's default release would do now, without doing it
    /// (the confirmation). Worktrees are checked for work when it runs.
    pub fn release_preview(&self) -> ReleaseResult {
        self.release_preview_of(&[], &[])
    }

    /// What a release of these lifetimes and names would do now
    /// (`release --dry-run`; an attached console's confirmation).
    pub fn release_preview_of(&self, lifetimes: &[Lifetime], names: &[String]) -> ReleaseResult {
        let st = self.lock();
        let sel = Selection::new(lifetimes, names, &Self::due_now(&st));
        let mut recs = st.recs.clone();
        let plan = plan_release(&recs, &sel, |i, r| {
            if st.rt[i].leaving {
                return Standing::Leaving;
            }
            match r.state {
                InstanceState::Ready | InstanceState::Planned => Standing::Idle,
                InstanceState::Starting => Standing::Working("starting"),
                _ => Standing::Working("busy"),
            }
        });
        let depth = |p: &str| st.waiting.get(p).copied().unwrap_or(0);
        let mut retained = retain_working(&mut recs, &plan, depth);
        let (released, kept) = settle_idle(&mut recs, &plan, &HashMap::new(), depth);
        retained.extend(kept);
        ReleaseResult::new(&sel, &self.loop_id, &self.capacity_ref, released, retained)
    }
}
