//! The provisioner a run uses: resolves a role's pack config, creates its
//! artifact directory in the run directory, and only then hands back the
//! route. A play can make it slow or failing for demos and tests
//! (`[palette.simulate]`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::model::PaletteSimulate;
use super::router::{ProvisionRequest, Provisioner, RouteEntry};
use crate::kernel::{BoxFuture, RoleOrigin};

pub struct RunProvisioner {
    /// Where role artifact directories go (`<run>/roles/<role>/`); `None`
    /// creates none (previews).
    pub run_dir: Option<PathBuf>,
    pub simulate: PaletteSimulate,
    /// Sim time factor, applied to the simulated delay.
    pub speed: f64,
    /// The agent of each role; roles not listed use `default_agent`.
    pub agents: HashMap<String, Arc<str>>,
    pub default_agent: Arc<str>,
}

impl Provisioner for RunProvisioner {
    fn provision(&self, req: ProvisionRequest) -> BoxFuture<Result<RouteEntry, String>> {
        // The simulated delay is for watching expansions; initial roles are
        // provisioned before the run, where a delay would only hold it up.
        let delay = if req.origin == RoleOrigin::Expanded && !req.restoring {
            Duration::from_micros(
                ((self.simulate.provision_delay_ms as f64) * 1000.0 / self.speed).round() as u64,
            )
        } else {
            Duration::ZERO
        };
        let fail = !req.restoring && self.simulate.fail_roles.iter().any(|r| **r == *req.role);
        let dir = self
            .run_dir
            .as_ref()
            .map(|d| d.join("roles").join(&*req.role));
        let agent = self
            .agents
            .get(&*req.role)
            .cloned()
            .unwrap_or_else(|| self.default_agent.clone());
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if fail {
                return Err(
                    "simulated provisioning failure ([palette.simulate] fail_roles)".into(),
                );
            }
            if req.origin == RoleOrigin::Expanded && !req.config.active {
                return Err(format!("the pack marks {} inactive", req.role));
            }
            // Everything is resolved; the directory is the last step, so a
            // failure above leaves nothing behind.
            if let Some(dir) = &dir {
                crate::store::private_dir(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            Ok(RouteEntry {
                role: req.role.clone(),
                disposition: req.disposition,
                modes: req.modes.iter().map(|m| Arc::from(m.as_str())).collect(),
                model: req.config.model.as_deref().map(Arc::from),
                effort: req.config.effort,
                agent,
                params: Arc::new(Value::Null),
                origin: req.origin,
                by: req.by,
                artifact_dir: dir,
            })
        })
    }
}
