//! ADR-0036 D3/D4: the awaitable, race-safe role router behind the kernel's
//! node-builder seam.
//!
//! The palette lock is a plain mutex held only for short, synchronous
//! critical sections: never across provisioning, never while the kernel is
//! touched (the kernel has no graph lock; it owns its state and receives
//! this router's decisions as messages).

mod seams;
use seams::*;

use std::panic::{AssertUnwindSafe, catch_unwind};

use futures_util::FutureExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rustc_hash::FxHashMap;
use tokio::sync::watch;

use super::catalog::{Catalog, RoleConfig, canonical};
use super::clause::{install_clause, render_delegation_clause};
use super::model::{Disposition, PaletteConfig, PaletteSnapshot};
pub use super::provision::{ProvisionError, ProvisionRequest, Provisioner, RouteEntry};
use crate::kernel::ledger::{DROP_DETAIL_MAX, truncate_chars};
use crate::kernel::{
    BoxFuture, Candidate, DropReason, Emitter, External, ExternalSender, InstructionDecorator,
    NodeBuilder, PaletteCounts, Rejection, RoleOrigin, RouteResult, SignalKind, SpawnBudget,
    SpawnRequest,
};

/// Why a palette could not be set up before a run, or taken up after one:
/// the role, mode or snapshot field at fault and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum PaletteError {
    #[error("initial palette role {role}: {error}")]
    Initial {
        role: Arc<str>,
        error: ProvisionError,
    },
    #[error("restoring palette role {role}: {error}")]
    Restoring {
        role: Arc<str>,
        error: ProvisionError,
    },
    #[error(
        "the saved palette has role {0:?}, which the current catalog and the play's profiles do not know"
    )]
    UnknownRole(String),
    #[error(
        "the saved palette gives role {role:?} mode {mode:?}, which the current catalog does not have"
    )]
    UnknownMode { role: String, mode: String },
    #[error(
        "the saved palette gives role {role:?} mode {mode:?}, which the current pack no longer allows (allowed: {})",
        .allowed.join(", ")
    )]
    ModeNotAllowed {
        role: String,
        mode: String,
        allowed: Vec<String>,
    },
    #[error(
        "the saved palette gives role {role:?} modes [{}], but the current pack and play give it [{}]",
        .was.join(", "),
        .now.join(", ")
    )]
    ModesChanged {
        role: String,
        was: Vec<String>,
        now: Vec<String>,
    },
    #[error("the saved palette snapshot does not add up: {field} {what}")]
    Snapshot { field: &'static str, what: String },
}

/// `None` while provisioning, then its outcome for every waiter.
type Shared = Option<Result<Arc<RouteEntry>, Arc<str>>>;

#[derive(Default)]
struct State {
    routes: FxHashMap<Arc<str>, Arc<RouteEntry>>,
    initial: Vec<Arc<str>>,
    expanded: Vec<Arc<str>>,
    reserved: Vec<Arc<str>>,
    consumed: u32,
    in_flight: FxHashMap<Arc<str>, watch::Receiver<Shared>>,
}

pub struct PaletteRouter {
    cfg: Arc<PaletteConfig>,
    state: Mutex<State>,
    provisioner: Arc<dyn Provisioner>,
    events: OnceLock<ExternalSender>,
    attempts: AtomicUsize,
}

/// The one role that may expand the palette (ADR-0036 D3 step 4).
const ORCHESTRATOR: &str = "orchestrator";

fn provisioner_panicked(payload: &(dyn std::any::Any + Send)) -> ProvisionError {
    ProvisionError::Panicked(crate::kernel::panic_message(payload))
}

fn bounded(s: &str) -> String {
    truncate_chars(s, DROP_DETAIL_MAX).to_string()
}

impl PaletteRouter {
    pub fn new(cfg: Arc<PaletteConfig>, provisioner: Arc<dyn Provisioner>) -> Arc<Self> {
        Arc::new(PaletteRouter {
            cfg,
            state: Mutex::default(),
            provisioner,
            events: OnceLock::new(),
            attempts: AtomicUsize::new(0),
        })
    }

    /// Connects the router's signals to a run's stream.
    pub fn attach(&self, events: ExternalSender) {
        let _ = self.events.set(events);
    }

    pub fn config(&self) -> &PaletteConfig {
        &self.cfg
    }

    /// How many provisioning attempts have started (initial ones included).
    pub fn provision_attempts(&self) -> usize {
        self.attempts.load(Ordering::Relaxed)
    }

    /// Runs the provisioner. One that panics is a failed provisioning with
    /// what the panic said (D3: provisioning failures are typed, never an
    /// executor error), so the reservation is rolled back as for any other
    /// failure.
    async fn provision(&self, req: ProvisionRequest) -> Result<RouteEntry, ProvisionError> {
        let fut = match catch_unwind(AssertUnwindSafe(|| self.provisioner.provision(req))) {
            Ok(fut) => fut,
            Err(p) => return Err(provisioner_panicked(&*p)),
        };
        AssertUnwindSafe(fut)
            .catch_unwind()
            .await
            .unwrap_or_else(|p| Err(provisioner_panicked(&*p)))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside a critical section cannot leave half-applied state
        // (each section is a few assignments), so a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn snapshot(&self) -> PaletteSnapshot {
        let st = self.lock();
        let names = |v: &[Arc<str>]| v.iter().map(|s| s.to_string()).collect();
        PaletteSnapshot {
            initial_roles: names(&st.initial),
            expanded_roles: names(&st.expanded),
            reserved_roles: names(&st.reserved),
            max_new_roles: self.cfg.palette.expansion.max_new_roles,
            consumed_new_roles: st.consumed,
        }
    }

    pub fn route(&self, role: &str) -> Option<Arc<RouteEntry>> {
        self.lock().routes.get(role).cloned()
    }

    fn emit(&self, kind: SignalKind) {
        if let Some(tx) = self.events.get() {
            let _ = tx.send(External::Signal(kind));
        }
    }

    /// Reports both budgets to the run (after `attach`).
    pub fn emit_counts(&self) {
        let Some(tx) = self.events.get() else { return };
        let st = self.lock();
        let counts = PaletteCounts {
            initial: st.initial.iter().cloned().collect(),
            expanded: st.expanded.iter().cloned().collect(),
            reserved: st.reserved.iter().cloned().collect(),
            consumed: st.consumed,
            max_new_roles: self.cfg.palette.expansion.max_new_roles,
        };
        drop(st);
        let _ = tx.send(External::Palette(counts));
    }

    fn emit_provisioned(&self, e: &RouteEntry) {
        self.emit(SignalKind::RoleProvisioned {
            role: e.role.clone(),
            origin: e.origin,
            by: e.by.clone(),
            disposition: Arc::from(e.disposition.as_str()),
            model: e.model.clone(),
            effort: e.effort.map(|x| Arc::from(x.as_str())),
            modes: e.modes.clone(),
        });
    }

    fn reject(
        &self,
        role: &str,
        reason: DropReason,
        detail: String,
        by: &Option<Arc<str>>,
    ) -> Rejection {
        let detail = bounded(&detail);
        self.emit(SignalKind::ExpansionRejected {
            role: Arc::from(role),
            reason,
            detail: Arc::from(detail.as_str()),
            by: by.clone(),
        });
        Rejection::new(reason, detail)
    }

    fn provision_request(
        &self,
        role: &Arc<str>,
        origin: RoleOrigin,
        by: Option<Arc<str>>,
    ) -> ProvisionRequest {
        let initial = self.cfg.initial(role);
        let profile = self.cfg.profiles.get(&**role).cloned();
        let config = match (&profile, self.cfg.pack.get(&**role)) {
            (_, Some(c)) => c.clone(),
            (Some(p), None) => RoleConfig {
                model: p.model.clone(),
                effort: None,
                default_modes: p.modes.clone(),
                modes_allow: Vec::new(),
                active: true,
            },
            (None, None) => RoleConfig {
                model: None,
                effort: None,
                default_modes: Vec::new(),
                modes_allow: Vec::new(),
                active: true,
            },
        };
        let modes = match initial {
            Some(pr) if !pr.modes.is_empty() => pr.modes.clone(),
            _ => config.default_modes.clone(),
        };
        ProvisionRequest {
            role: role.clone(),
            disposition: initial.map(|pr| pr.disposition).unwrap_or_default(),
            modes,
            config,
            profile,
            origin,
            by,
            restoring: false,
        }
    }

    /// Provisions every initial palette role, once, before execution (D2),
    /// in declaration order. An error names the role that failed.
    pub async fn provision_initial(&self) -> Result<(), PaletteError> {
        if !self.lock().initial.is_empty() {
            return Ok(());
        }
        for pr in &self.cfg.palette.roles {
            let role: Arc<str> = Arc::from(pr.role.as_str());
            let req = self.provision_request(&role, RoleOrigin::Initial, None);
            self.attempts.fetch_add(1, Ordering::Relaxed);
            let provisioned = self.provision(req).await;
            let entry = Arc::new(provisioned.map_err(|error| PaletteError::Initial {
                role: role.clone(),
                error,
            })?);
            {
                let mut st = self.lock();
                st.routes.insert(role.clone(), entry.clone());
                st.initial.push(role);
            }
            self.emit_provisioned(&entry);
        }
        self.emit_counts();
        Ok(())
    }

    /// ADR-0036 D6: rebuilds the routes of a stopped run from its snapshot.
    /// Initial and expanded roles are published once, without charging
    /// again; a reservation that was in flight is dropped. The saved roles
    /// and their modes are checked against the current catalog and pack.
    pub async fn restore(&self, snap: &PaletteSnapshot) -> Result<(), PaletteError> {
        self.restore_checked(snap, &FxHashMap::default()).await
    }

    /// [`restore`](Self::restore), holding each role to the modes the run
    /// recorded for it (`saved`, by role): D6 validates the saved palette
    /// against the current pack, so a pack edited since — a mode no longer
    /// allowed, or other modes now — refuses the resume, naming both,
    /// instead of the run going on with modes it never had.
    pub async fn restore_checked(
        &self,
        snap: &PaletteSnapshot,
        saved: &FxHashMap<String, Vec<String>>,
    ) -> Result<(), PaletteError> {
        self.check_snapshot(snap)?;
        let catalog = super::Catalog::builtin();
        // A run that stopped before its initial roles were recorded gets
        // them from the declaration (resume checked it is unchanged).
        let declared: Vec<String> = self
            .cfg
            .palette
            .roles
            .iter()
            .map(|r| r.role.clone())
            .collect();
        let initial = if snap.initial_roles.is_empty() {
            &declared
        } else {
            &snap.initial_roles
        };
        for (role, origin) in initial.iter().map(|r| (r, RoleOrigin::Initial)).chain(
            snap.expanded_roles
                .iter()
                .map(|r| (r, RoleOrigin::Expanded)),
        ) {
            let name: Arc<str> = Arc::from(role.as_str());
            let known = self.cfg.pack.contains_key(role) || self.cfg.profiles.contains_key(role);
            if !known {
                return Err(PaletteError::UnknownRole(role.clone()));
            }
            let mut req = self.provision_request(&name, origin, None);
            if let Some(bad) = req.modes.iter().find(|m| !catalog.has_mode(m)) {
                return Err(PaletteError::UnknownMode {
                    role: role.clone(),
                    mode: bad.clone(),
                });
            }
            // The modes the run recorded (else the ones derived now) must
            // still be allowed, and be what the role gets now.
            let allow = &req.config.modes_allow;
            let modes = saved.get(role.as_str()).unwrap_or(&req.modes);
            if let Some(bad) = modes
                .iter()
                .find(|m| !allow.is_empty() && !allow.contains(m))
            {
                return Err(PaletteError::ModeNotAllowed {
                    role: role.clone(),
                    mode: bad.clone(),
                    allowed: allow.clone(),
                });
            }
            if *modes != req.modes {
                return Err(PaletteError::ModesChanged {
                    role: role.clone(),
                    was: modes.clone(),
                    now: req.modes.clone(),
                });
            }
            req.restoring = true;
            let provisioned = self.provision(req).await;
            let entry = Arc::new(provisioned.map_err(|error| PaletteError::Restoring {
                role: name.clone(),
                error,
            })?);
            let mut st = self.lock();
            st.routes.insert(name.clone(), entry);
            match origin {
                RoleOrigin::Initial => st.initial.push(name),
                RoleOrigin::Expanded => st.expanded.push(name),
            }
        }
        self.lock().consumed = snap.consumed_new_roles;
        self.emit_counts();
        Ok(())
    }

    /// D6: the saved accounting must be one this play could have produced,
    /// or a damaged or edited checkpoint would restore a larger authority
    /// set or a fresh budget. Each mismatch names the snapshot field.
    fn check_snapshot(&self, snap: &PaletteSnapshot) -> Result<(), PaletteError> {
        let max = self.cfg.palette.expansion.max_new_roles;
        let bad = |field: &'static str, what: String| Err(PaletteError::Snapshot { field, what });
        if snap.initial_roles.is_empty() {
            // The run stopped before its palette was first recorded: the
            // declaration stands in, and nothing can have been recruited.
            if !snap.expanded_roles.is_empty() || snap.consumed_new_roles != 0 {
                return bad(
                    "initial_roles",
                    "is empty, yet the snapshot records recruited roles".into(),
                );
            }
        } else if snap.max_new_roles != max {
            return bad(
                "max_new_roles",
                format!("is {}, but the play allows {max}", snap.max_new_roles),
            );
        }
        let catalog = super::Catalog::builtin();
        let mut seen: Vec<&str> = Vec::new();
        for role in &snap.expanded_roles {
            if catalog.role(role).is_none() {
                let what = if self.cfg.profiles.contains_key(role) {
                    "a user profile, which is never recruited (profiles are usable only in the initial palette)"
                } else {
                    "not a role of the current catalog"
                };
                return bad("expanded_roles", format!("has {role:?}: {what}"));
            }
            if snap.initial_roles.contains(role) || self.cfg.initial(role).is_some() {
                return bad(
                    "expanded_roles",
                    format!("has {role:?}, which is an initial palette role"),
                );
            }
            if seen.contains(&role.as_str()) {
                return bad("expanded_roles", format!("has {role:?} twice"));
            }
            seen.push(role);
        }
        let expanded = snap.expanded_roles.len();
        if snap.consumed_new_roles as usize != expanded {
            return bad(
                "consumed_new_roles",
                format!(
                    "is {}, but expanded_roles has {expanded} role(s); each recruited role costs exactly one unit",
                    snap.consumed_new_roles
                ),
            );
        }
        if snap.consumed_new_roles > max {
            return bad(
                "consumed_new_roles",
                format!("is {}, over max_new_roles {max}", snap.consumed_new_roles),
            );
        }
        Ok(())
    }

    /// D2: a role named by planning (an initial operation) that is outside
    /// the palette goes through the same resolver as a live request, as the
    /// orchestrator.
    pub async fn resolve_planned(
        self: &Arc<Self>,
        role: &str,
    ) -> Result<Arc<RouteEntry>, Rejection> {
        self.route_role(
            Arc::from(canonical(role)),
            Some(Arc::from("orchestrator")),
            Some(Arc::from("plan")),
        )
        .await
    }

    /// D3 steps 2–10 for one target role.
    pub async fn route_role(
        self: &Arc<Self>,
        role: Arc<str>,
        requester: Option<Arc<str>>,
        by: Option<Arc<str>>,
    ) -> Result<Arc<RouteEntry>, Rejection> {
        enum Next {
            Wait(watch::Receiver<Shared>),
            Provision(watch::Sender<Shared>),
        }
        let next = {
            let mut st = self.lock();
            match self.decide(&mut st, &role, requester.as_deref(), &by) {
                Decision::Route(r) => return Ok(r),
                Decision::Reject(rej) => return Err(rej),
                Decision::Wait(rx) => Next::Wait(rx),
                Decision::Provision => {
                    // 7: reserve one unit and publish the in-flight marker.
                    st.reserved.push(role.clone());
                    let (tx, rx) = watch::channel(None);
                    st.in_flight.insert(role.clone(), rx);
                    Next::Provision(tx)
                }
            }
        };
        match next {
            Next::Wait(mut rx) => {
                // 5: share the attempt already running; reserve nothing.
                let outcome = rx.wait_for(Option::is_some).await.map(|v| v.clone());
                match outcome {
                    Ok(Some(Ok(entry))) => Ok(entry),
                    Ok(Some(Err(msg))) => Err(Rejection::new(
                        DropReason::RoleProvisionFailed,
                        msg.to_string(),
                    )),
                    _ => Err(Rejection::new(
                        DropReason::RoleProvisionFailed,
                        "provisioning ended without an answer",
                    )),
                }
            }
            Next::Provision(tx) => {
                self.emit(SignalKind::RoleReserved {
                    role: role.clone(),
                    by: by.clone(),
                });
                self.emit_counts();
                let guard = Provisioning {
                    router: self.clone(),
                    role: role.clone(),
                    by: by.clone(),
                    tx: Some(tx),
                };
                let req = self.provision_request(&role, RoleOrigin::Expanded, by);
                self.attempts.fetch_add(1, Ordering::Relaxed);
                // 8: outside the lock.
                let result = self.provision(req).await;
                guard.finish(result)
            }
        }
    }

    /// Steps 2–6, under the lock.
    fn decide(
        &self,
        st: &mut State,
        role: &Arc<str>,
        requester: Option<&str>,
        by: &Option<Arc<str>>,
    ) -> Decision {
        if let Some(r) = st.routes.get(role) {
            return Decision::Route(r.clone());
        }
        let catalog = Catalog::builtin();
        if catalog.role(role).is_none() {
            let detail = if self.cfg.profiles.contains_key(&**role) {
                format!(
                    "{role:?} is a user profile; profiles are usable only when named in the initial palette"
                )
            } else {
                format!(
                    "no catalog role {role:?}; catalog roles: {}",
                    catalog.role_names().join(", ")
                )
            };
            return Decision::Reject(self.reject(role, DropReason::UnknownCatalogRole, detail, by));
        }
        let policy = &self.cfg.palette.expansion;
        if requester != Some(ORCHESTRATOR) || !policy.orchestrator_may_expand {
            let detail = match requester {
                None => format!(
                    "{role:?} is outside the palette and the request has no trusted requester role"
                ),
                Some(ORCHESTRATOR) => {
                    format!("{role:?} is outside the palette and orchestrator_may_expand is false")
                }
                Some(r) => format!(
                    "{role:?} is outside the palette; only the orchestrator may expand it, not {r:?}"
                ),
            };
            return Decision::Reject(self.reject(
                role,
                DropReason::RequesterNotAuthorized,
                detail,
                by,
            ));
        }
        if let Some(rx) = st.in_flight.get(role) {
            return Decision::Wait(rx.clone());
        }
        let used = st.consumed + st.reserved.len() as u32;
        if used >= policy.max_new_roles {
            let detail = format!(
                "{role:?} needs a new-role unit: {} consumed and {} reserved of max_new_roles {}",
                st.consumed,
                st.reserved.len(),
                policy.max_new_roles
            );
            return Decision::Reject(self.reject(
                role,
                DropReason::PaletteBudgetExhausted,
                detail,
                by,
            ));
        }
        Decision::Provision
    }

    /// The requester may emit spawn requests only from an emission-capable
    /// route (D1); identity is the trusted metadata, never the payload (D4).
    fn authorise(&self, emitter: &Emitter) -> Result<Arc<RouteEntry>, Rejection> {
        let Some(role) = &emitter.requester_role else {
            return Err(Rejection::new(
                DropReason::RequesterNotAuthorized,
                "the emitter has no trusted requester role",
            ));
        };
        match self.lock().routes.get(role) {
            Some(r) if r.disposition == Disposition::EmissionCapable => Ok(r.clone()),
            Some(_) => Err(Rejection::new(
                DropReason::RequesterNotAuthorized,
                format!("{role} is terminal in this palette: it cannot create graph work"),
            )),
            None => Err(Rejection::new(
                DropReason::RequesterNotAuthorized,
                format!("{role} has no route in this palette"),
            )),
        }
    }

    /// Whether operations on `route` may expand the palette: an
    /// emission-capable `orchestrator` in a play that allows expansion at
    /// all. Such a route is authority in itself, so only the orchestrator
    /// may assign work to it (see [`PaletteRouter::confine`]).
    fn expands(&self, route: &RouteEntry) -> bool {
        let policy = &self.cfg.palette.expansion;
        &*route.role == ORCHESTRATOR
            && route.disposition == Disposition::EmissionCapable
            && policy.orchestrator_may_expand
            && policy.max_new_roles > 0
    }

    /// A spawned operation's authority never exceeds its emitter's (P3,
    /// D4): its trusted requester role is the route it runs on, so a route
    /// that may expand the palette is open only to the orchestrator.
    /// Otherwise a worker could spawn an `orchestrator` child and have it
    /// recruit what the worker itself may not.
    fn confine(&self, target: &RouteEntry, requester: Option<&str>) -> Result<(), Rejection> {
        if !self.expands(target) || requester == Some(ORCHESTRATOR) {
            return Ok(());
        }
        let who = requester.unwrap_or("an operation without a trusted requester role");
        Err(Rejection::new(
            DropReason::RequesterNotAuthorized,
            format!(
                "only the orchestrator may assign work to \"orchestrator\": an orchestrator operation may expand the palette, and {who} may not"
            ),
        ))
    }

    /// Step 11: the child, built through the ordinary allowlisted builder
    /// (the request's operation was checked against the allowlist when it
    /// was read). It runs with its role's agent, flag profile and ToolSet,
    /// never with less restriction than the play gave the role.
    fn candidate(request: &SpawnRequest, target: &RouteEntry) -> RouteResult {
        let setup = target
            .setup
            .as_ref()
            .map_err(|why| Rejection::new(DropReason::RoleProvisionFailed, bounded(why)))?;
        Ok(Some(Candidate {
            instruction: request.instruction.clone(),
            assignee: Some(target.role.clone()),
            requester_role: Some(target.role.clone()),
            agent: setup.agent.clone(),
            params: setup.params.clone(),
            operation: request.operation,
        }))
    }

    /// The whole algorithm for one request.
    pub async fn route_request(
        self: Arc<Self>,
        request: SpawnRequest,
        emitter: Emitter,
    ) -> RouteResult {
        let own = self.authorise(&emitter)?;
        if request.instruction.trim().is_empty() {
            return Ok(None);
        }
        let target = match &request.assignee {
            None => own,
            Some(a) => {
                self.route_role(
                    Arc::from(canonical(a)),
                    emitter.requester_role.clone(),
                    Some(emitter.name.clone()),
                )
                .await?
            }
        };
        self.confine(&target, emitter.requester_role.as_deref())?;
        Self::candidate(&request, &target)
    }
}
