//! ADR-0036: role palettes. The closed catalog, the palette a play declares,
//! the race-safe router on the kernel's node-builder seam, two independent
//! budgets, and the delegation clause.

pub mod catalog;
pub mod clause;
pub mod model;
pub mod provision;
pub mod router;

use std::sync::Arc;

pub use catalog::{CATALOG_NAME, Catalog, Effort, RoleConfig, canonical};
pub use clause::{CLAUSE_BEGIN, CLAUSE_END, install_clause, render_delegation_clause};
pub use model::{
    AgentSetup, Disposition, PaletteConfig, PaletteExpansionPolicy, PalettePlanningContext,
    PaletteRole, PaletteRouteRejection, PaletteSimulate, PaletteSnapshot, PlayRolePalette,
    SetupSites, UserProfile,
};
pub use provision::{RoleSetup, RoleSetups, RunProvisioner, SetupError};
pub use router::{
    PaletteError, PaletteRouter, ProvisionError, ProvisionRequest, Provisioner, RouteEntry,
};

use crate::kernel::{AgentFailure, OpId, Run};

/// Prepares a run's palette before execution: every initial role is
/// provisioned once, then initial operations whose role is outside the
/// palette go through the router as the orchestrator would (D2). An
/// operation whose role is refused is failed before the run starts, with
/// the reason. Returns an error when an initial role cannot be provisioned.
pub async fn prepare(
    router: &Arc<PaletteRouter>,
    ops: &[(OpId, String)],
    run: &mut Run,
) -> Result<(), PaletteError> {
    router.attach(run.external());
    if router.config().legacy {
        run.external()
            .send(crate::kernel::External::Signal(
                crate::kernel::SignalKind::Warning {
                    message: Arc::from(model::LEGACY_WARNING),
                    op_id: None,
                },
            ))
            .ok();
    }
    router.provision_initial().await?;
    for (op_id, role) in ops {
        if router.route(role).is_some() {
            continue;
        }
        if let Err(rej) = router.resolve_planned(role).await {
            run.fail_before_start(*op_id, AgentFailure::new(rej.reason.as_str(), rej.detail));
        }
    }
    run.set_decorator(router.clone());
    Ok(())
}
