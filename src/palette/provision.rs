//! The provisioning seam (what a route is, what a provisioner is asked,
//! why it can fail) and the provisioner a run uses: resolves a role's pack config and what its
//! work runs on (agent, flag profile, ToolSet), creates its artifact
//! directory in the run directory, and only then hands back the route. A
//! play can make it slow or failing for demos and tests
//! (`[palette.simulate]`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::catalog::{Effort, RoleConfig};
use super::model::PaletteSimulate;
use super::model::{Disposition, UserProfile};
use crate::kernel::{BoxFuture, RoleOrigin};

/// A published role route: everything an operation of this role runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteEntry {
    pub role: Arc<str>,
    pub disposition: Disposition,
    pub modes: Arc<[Arc<str>]>,
    pub model: Option<Arc<str>>,
    pub effort: Option<Effort>,
    /// What work spawned onto this route (or added by the operator) runs
    /// on; an initial role the play names no agent for has none, and that
    /// work is refused as `role_provision_failed` with the reason.
    pub setup: Result<RoleSetup, Arc<str>>,
    pub origin: RoleOrigin,
    /// The operation whose request recruited it (expansions).
    pub by: Option<Arc<str>>,
    pub artifact_dir: Option<PathBuf>,
}

/// What a provisioner is asked to set up.
#[derive(Debug, Clone)]
pub struct ProvisionRequest {
    pub role: Arc<str>,
    pub disposition: Disposition,
    pub modes: Vec<String>,
    pub config: RoleConfig,
    pub profile: Option<UserProfile>,
    pub origin: RoleOrigin,
    pub by: Option<Arc<str>>,
    /// Rebuilding a route a stopped run had: no simulated delay or failure,
    /// nothing charged.
    pub restoring: bool,
}

/// Resolves model, tools, modes and artifacts for a role. Runs outside the
/// palette lock; may be slow or fail.
pub trait Provisioner: Send + Sync + 'static {
    fn provision(&self, req: ProvisionRequest) -> BoxFuture<Result<RouteEntry, ProvisionError>>;
}

/// Why a role could not be provisioned (D3: typed, never an executor
/// error); its text is the detail of the request dropped for it.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("simulated provisioning failure ([palette.simulate] fail_roles)")]
    Simulated,
    #[error("the pack marks {0} inactive")]
    Inactive(Arc<str>),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("cannot create {}: {error}", .dir.display())]
    ArtifactDir { dir: PathBuf, error: std::io::Error },
    #[error("the provisioner panicked: {0}")]
    Panicked(String),
}

/// What a role's spawned (or operator-added) work runs on: the agent and
/// its parameters (flag profile and ToolSet, as `AgentParams` carries
/// them).
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSetup {
    pub agent: Arc<str>,
    pub params: Arc<Value>,
}

impl RoleSetup {
    /// An agent with nothing selected (the sim agent's default behaviour).
    pub fn plain(agent: &str) -> RoleSetup {
        RoleSetup {
            agent: Arc::from(agent),
            params: Arc::new(Value::Null),
        }
    }
}

/// Why a role has no setup.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetupError {
    /// Nothing names an agent for the role, and defaulting to the
    /// simulator would run real work on it silently.
    #[error("{0}")]
    Missing(String),
    /// The play names one that cannot be used (not defined, or a ToolSet
    /// its format cannot express).
    #[error("{0}")]
    Invalid(String),
}

/// The setup of every role a run may route to, resolved once from the play
/// (see `Play::role_setups`).
#[derive(Debug, Clone)]
pub struct RoleSetups {
    /// Roles with a setup of their own (their palette entry, their first
    /// operation, their role profile).
    pub roles: HashMap<String, Result<RoleSetup, SetupError>>,
    /// Every other role (recruited ones): `[palette.defaults]`, the sim
    /// agent in a play whose work runs on no agent CLI, or why neither.
    pub fallback: Result<RoleSetup, SetupError>,
}

impl RoleSetups {
    /// Every role on one agent, with nothing selected (tests, previews of
    /// simulated plays).
    pub fn all_on(agent: &str) -> RoleSetups {
        RoleSetups {
            roles: HashMap::new(),
            fallback: Ok(RoleSetup::plain(agent)),
        }
    }

    pub fn for_role(&self, role: &str) -> Result<RoleSetup, SetupError> {
        match self.roles.get(role) {
            Some(r) => r.clone(),
            None => self.fallback.clone().map_err(|e| match e {
                SetupError::Missing(why) => SetupError::Missing(format!(
                    "no agent for role {role}: {why}; name one with agent = \"...\" on its [palette] roles entry or in [palette.defaults]"
                )),
                SetupError::Invalid(why) => SetupError::Invalid(why),
            }),
        }
    }
}

pub struct RunProvisioner {
    /// Where role artifact directories go (`<run>/roles/<role>/`); `None`
    /// creates none (previews).
    pub run_dir: Option<PathBuf>,
    pub simulate: PaletteSimulate,
    /// Sim time factor, applied to the simulated delay.
    pub speed: f64,
    /// What each role's work runs on.
    pub setups: Arc<RoleSetups>,
}

impl Provisioner for RunProvisioner {
    fn provision(&self, req: ProvisionRequest) -> BoxFuture<Result<RouteEntry, ProvisionError>> {
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
        let setup = self.setups.for_role(&req.role);
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if fail {
                return Err(ProvisionError::Simulated);
            }
            if req.origin == RoleOrigin::Expanded && !req.config.active {
                return Err(ProvisionError::Inactive(req.role.clone()));
            }
            // A recruited role without an agent is never published (D3:
            // a route exists only once its tools and agent are set up). An
            // initial role is in the palette whatever happens; without an
            // agent its route refuses the work it would be given.
            let setup = match setup {
                Ok(s) => Ok(s),
                Err(SetupError::Missing(why)) if req.origin == RoleOrigin::Initial => {
                    Err(Arc::from(why))
                }
                Err(e) => return Err(e.into()),
            };
            // Everything is resolved; the directory is the last step, so a
            // failure above leaves nothing behind.
            if let Some(dir) = &dir {
                crate::files::private_dir(dir).map_err(|error| ProvisionError::ArtifactDir {
                    dir: dir.clone(),
                    error,
                })?;
            }
            Ok(RouteEntry {
                role: req.role.clone(),
                disposition: req.disposition,
                modes: req.modes.iter().map(|m| Arc::from(m.as_str())).collect(),
                model: req.config.model.as_deref().map(Arc::from),
                effort: req.config.effort,
                setup,
                origin: req.origin,
                by: req.by,
                artifact_dir: dir,
            })
        })
    }
}
