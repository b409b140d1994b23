//! The role palette as the run's signals tell it: roles provisioned at the
//! start and by expansion, reservations in flight, refusals and both
//! budgets (ADR-0036 D4).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::kernel::{DropReason, RoleOrigin, SignalKind};
use crate::palette::PaletteSnapshot;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleRow {
    pub role: Arc<str>,
    pub disposition: Arc<str>,
    pub modes: Arc<[Arc<str>]>,
    pub model: Option<Arc<str>>,
    pub effort: Option<Arc<str>>,
    pub at: f64,
    pub by: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    pub role: Arc<str>,
    pub reason: DropReason,
    pub detail: Arc<str>,
    pub by: Option<Arc<str>>,
    pub at: f64,
    /// Its spawn_dropped entry has been seen (the two describe one refusal).
    pub in_ledger: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    pub consumed_new_roles: u32,
    pub reserved: usize,
    pub max_new_roles: u32,
    pub spawns_accepted: usize,
    pub max_spawn: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaletteState {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub initial: Vec<RoleRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expanded: Vec<RoleRow>,
    /// Reservations in flight: (role, when, by).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved: Vec<(Arc<str>, f64, Option<Arc<str>>)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<Rejection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Budgets>,
    /// The router's snapshot as the last `budget` signal gave it (what a
    /// resume restores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<PaletteSnapshot>,
}

/// Refusals that are about the palette (ADR-0036), not admission.
pub fn palette_reason(r: DropReason) -> bool {
    matches!(
        r,
        DropReason::UnknownCatalogRole
            | DropReason::RequesterNotAuthorized
            | DropReason::PaletteBudgetExhausted
            | DropReason::RoleProvisionFailed
    )
}

impl PaletteState {
    pub fn apply(&mut self, kind: &SignalKind, at: f64) {
        match kind {
            SignalKind::RoleProvisioned {
                role,
                origin,
                by,
                disposition,
                model,
                effort,
                modes,
            } => {
                let row = RoleRow {
                    role: role.clone(),
                    disposition: disposition.clone(),
                    modes: modes.clone(),
                    model: model.clone(),
                    effort: effort.clone(),
                    at,
                    by: by.clone(),
                };
                self.reserved.retain(|(r, _, _)| r != role);
                match origin {
                    RoleOrigin::Initial => self.initial.push(row),
                    RoleOrigin::Expanded => self.expanded.push(row),
                }
            }
            SignalKind::RoleReserved { role, by } => {
                self.reserved.push((role.clone(), at, by.clone()));
            }
            SignalKind::ExpansionRejected {
                role,
                reason,
                detail,
                by,
            } => {
                self.reserved.retain(|(r, _, _)| r != role);
                self.rejections.push(Rejection {
                    role: role.clone(),
                    reason: *reason,
                    detail: detail.clone(),
                    by: by.clone(),
                    at,
                    in_ledger: false,
                });
            }
            SignalKind::Budget {
                initial_roles,
                expanded_roles,
                reserved_roles,
                consumed_new_roles,
                max_new_roles,
                spawns_accepted,
                max_spawn,
            } => {
                self.budgets = Some(Budgets {
                    consumed_new_roles: *consumed_new_roles,
                    reserved: reserved_roles.len(),
                    max_new_roles: *max_new_roles,
                    spawns_accepted: *spawns_accepted,
                    max_spawn: *max_spawn,
                });
                let names = |v: &[Arc<str>]| v.iter().map(|s| s.to_string()).collect();
                self.snapshot = Some(PaletteSnapshot {
                    initial_roles: names(initial_roles),
                    expanded_roles: names(expanded_roles),
                    reserved_roles: names(reserved_roles),
                    max_new_roles: *max_new_roles,
                    consumed_new_roles: *consumed_new_roles,
                });
            }
            _ => {}
        }
    }

    /// A dropped spawn that is a palette refusal: the router announced it
    /// already when the role was outside the palette; a terminal
    /// requester's refusal shows up here only.
    pub fn dropped(
        &mut self,
        reason: DropReason,
        assignee: Option<&Arc<str>>,
        detail: &Arc<str>,
        by: Option<Arc<str>>,
        at: f64,
    ) {
        if !palette_reason(reason) {
            return;
        }
        let role = assignee
            .cloned()
            .unwrap_or_else(|| Arc::from("(its own role)"));
        match self
            .rejections
            .iter_mut()
            .rev()
            .find(|r| !r.in_ledger && r.reason == reason && r.role == role)
        {
            Some(r) => r.in_ledger = true,
            None => self.rejections.push(Rejection {
                role,
                reason,
                detail: detail.clone(),
                by,
                at,
                in_ledger: true,
            }),
        }
    }
}
