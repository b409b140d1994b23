//! The router behind the kernel's seams: a spawn request built into an
//! operation (`NodeBuilder`), an instruction decorated with its role
//! (`InstructionDecorator`), and a role's provisioning held until it
//! finishes or is rolled back.

use super::*;

pub(super) enum Decision {
    Route(Arc<RouteEntry>),
    Reject(Rejection),
    Wait(watch::Receiver<Shared>),
    Provision,
}

/// One provisioning attempt in flight. Finishing it publishes or rolls
/// back; dropping it unfinished (cancellation) rolls back and tells every
/// waiter (D3 step 10).
pub(super) struct Provisioning {
    pub(super) router: Arc<PaletteRouter>,
    pub(super) role: Arc<str>,
    pub(super) by: Option<Arc<str>>,
    pub(super) tx: Option<watch::Sender<Shared>>,
}

impl Provisioning {
    pub(super) fn finish(
        mut self,
        result: Result<RouteEntry, ProvisionError>,
    ) -> Result<Arc<RouteEntry>, Rejection> {
        let tx = self.tx.take().expect("finished once");
        let router = self.router.clone();
        match result {
            Ok(entry) => {
                let entry = Arc::new(entry);
                {
                    // 9: publish, move reserved -> expanded, charge one unit.
                    let mut st = router.lock();
                    st.reserved.retain(|r| *r != self.role);
                    st.in_flight.remove(&self.role);
                    st.routes.insert(self.role.clone(), entry.clone());
                    st.expanded.push(self.role.clone());
                    st.consumed += 1;
                }
                tx.send_replace(Some(Ok(entry.clone())));
                router.emit_provisioned(&entry);
                router.emit_counts();
                Ok(entry)
            }
            Err(e) => {
                let msg = bounded(&e.to_string());
                rollback(&router, &self.role);
                tx.send_replace(Some(Err(Arc::from(msg.as_str()))));
                let rej = router.reject(&self.role, DropReason::RoleProvisionFailed, msg, &self.by);
                router.emit_counts();
                Err(rej)
            }
        }
    }
}

pub(super) fn rollback(router: &PaletteRouter, role: &Arc<str>) {
    let mut st = router.lock();
    st.reserved.retain(|r| r != role);
    st.in_flight.remove(role);
}

impl Drop for Provisioning {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            rollback(&self.router, &self.role);
            let msg = "provisioning was cancelled";
            tx.send_replace(Some(Err(Arc::from(msg))));
            self.router.reject(
                &self.role,
                DropReason::RoleProvisionFailed,
                msg.into(),
                &self.by,
            );
            self.router.emit_counts();
        }
    }
}

impl NodeBuilder for Arc<PaletteRouter> {
    fn build(&self, request: &SpawnRequest, emitter: &Emitter) -> BoxFuture<RouteResult> {
        let (router, request, emitter) = (self.clone(), request.clone(), emitter.clone());
        Box::pin(router.route_request(request, emitter))
    }

    /// Existing routes and every refusal that needs no waiting are decided
    /// here, synchronously; only provisioning (or waiting on it) is async.
    fn route_now(&self, request: &SpawnRequest, emitter: &Emitter) -> Option<RouteResult> {
        let own = match self.authorise(emitter) {
            Ok(r) => r,
            Err(rej) => return Some(Err(rej)),
        };
        if request.instruction.trim().is_empty() {
            return Some(Ok(None));
        }
        let requester = emitter.requester_role.as_deref();
        let Some(a) = &request.assignee else {
            return Some(
                self.confine(&own, requester)
                    .and_then(|()| PaletteRouter::candidate(request, &own)),
            );
        };
        let role: Arc<str> = Arc::from(canonical(a));
        let by = Some(emitter.name.clone());
        let mut st = self.lock();
        match self.decide(&mut st, &role, requester, &by) {
            Decision::Route(r) => Some(
                self.confine(&r, requester)
                    .and_then(|()| PaletteRouter::candidate(request, &r)),
            ),
            Decision::Reject(rej) => Some(Err(rej)),
            Decision::Wait(_) | Decision::Provision => None,
        }
    }

    fn route_role(&self, role: &str) -> Result<crate::kernel::RoleRoute, Rejection> {
        let canon = canonical(role);
        let st = self.lock();
        let Some(r) = st.routes.get(canon.as_str()) else {
            let mut roles: Vec<&str> = st.routes.keys().map(|k| &**k).collect();
            roles.sort_unstable();
            return Err(Rejection::new(
                DropReason::BuilderError,
                format!(
                    "no role {role:?} in this run: add work only for a role the run has ({})",
                    roles.join(", ")
                ),
            ));
        };
        let setup = r
            .setup
            .as_ref()
            .map_err(|why| Rejection::new(DropReason::RoleProvisionFailed, bounded(why)))?;
        Ok(crate::kernel::RoleRoute {
            role: r.role.clone(),
            agent: setup.agent.clone(),
            params: setup.params.clone(),
        })
    }
}

impl InstructionDecorator for PaletteRouter {
    fn decorate(
        &self,
        role: Option<&str>,
        instruction: &Arc<str>,
        spawns: SpawnBudget,
    ) -> Arc<str> {
        let st = self.lock();
        let Some(entry) = role.and_then(|r| st.routes.get(r)) else {
            return instruction.clone();
        };
        // The clause names what the router will accept: a route that may
        // expand the palette is open to the orchestrator alone, and a role
        // with no agent takes no work.
        let is_orchestrator = &*entry.role == ORCHESTRATOR;
        let allowed: Vec<&str> = st
            .initial
            .iter()
            .chain(&st.expanded)
            .filter(|r| {
                st.routes
                    .get(*r)
                    .is_some_and(|e| e.setup.is_ok() && (is_orchestrator || !self.expands(e)))
            })
            .map(|s| &**s)
            .collect();
        let policy = &self.cfg.palette.expansion;
        let remaining_new = policy
            .max_new_roles
            .saturating_sub(st.consumed + st.reserved.len() as u32);
        let may_expand = is_orchestrator && policy.orchestrator_may_expand && remaining_new > 0;
        let clause = render_delegation_clause(
            &entry.role,
            entry.disposition,
            &allowed,
            may_expand,
            remaining_new,
            spawns.max.saturating_sub(spawns.accepted),
        );
        Arc::from(install_clause(instruction, &clause))
    }
}
