//! ADR-0036 D1–D3 data: the palette a play declares, its planning context,
//! user profiles, and the persisted `PaletteSnapshot`.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::catalog::{Catalog, RoleConfig};
use crate::kernel::DropReason;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// May not create graph work; keeps ordinary results and escalation.
    #[default]
    Terminal,
    /// May emit spawn requests (D1).
    EmissionCapable,
}

impl Disposition {
    pub const ALLOWED: [&'static str; 2] = ["terminal", "emission_capable"];

    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Terminal => "terminal",
            Disposition::EmissionCapable => "emission_capable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaletteRole {
    /// Canonical name.
    pub role: String,
    pub disposition: Disposition,
    pub modes: Vec<String>,
    /// What work spawned onto this role (or added by the operator) runs on,
    /// when the play says so on the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<AgentSetup>,
}

/// An agent and what it runs with: the agent-side half of a role route
/// (ADR-0036 D3: a route is published only with its model, tools and
/// policy resolved). `flag_profile` and `tools` are written for `agent`,
/// so they come together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSetup {
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flag_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<crate::vocab::ToolSet>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaletteExpansionPolicy {
    pub max_new_roles: u32,
    pub orchestrator_may_expand: bool,
    pub catalog: String,
}

impl Default for PaletteExpansionPolicy {
    fn default() -> Self {
        PaletteExpansionPolicy {
            max_new_roles: 0,
            orchestrator_may_expand: true,
            catalog: super::catalog::CATALOG_NAME.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlayRolePalette {
    pub roles: Vec<PaletteRole>,
    pub expansion: PaletteExpansionPolicy,
    /// `[palette.defaults]`: what roles with no setup of their own run on
    /// (recruited roles among them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<AgentSetup>,
}

/// For demos and tests: slow or failing provisioning.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PaletteSimulate {
    pub provision_delay_ms: u64,
    pub fail_roles: Vec<String>,
}

/// `[profiles.<name>]`: usable only when named in the initial palette, never
/// an expansion source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserProfile {
    pub description: Option<String>,
    pub model: Option<String>,
    pub modes: Vec<String>,
}

/// Everything about roles a play declares, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaletteConfig {
    pub palette: PlayRolePalette,
    /// True when the play had no `[palette]` and the full roster stands in.
    pub legacy: bool,
    pub profiles: IndexMap<String, UserProfile>,
    /// The pack after the play's overrides, for every catalog role.
    pub pack: IndexMap<String, RoleConfig>,
    pub simulate: PaletteSimulate,
    /// Where the play file declared what roles run on: checks that need
    /// the operations use it after the palette is read. Not persisted.
    #[serde(skip)]
    pub sites: SetupSites,
}

/// Positions (byte ranges in the play file) of what `[palette]` says about
/// agents, and the role profiles the play declares, for load-time checks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SetupSites {
    /// Each declared `agent` (on a roles entry or in `[palette.defaults]`)
    /// with where it is written.
    pub agents: Vec<(String, std::ops::Range<usize>)>,
    /// Each palette role with where its `role` is written.
    pub roles: Vec<(String, std::ops::Range<usize>)>,
    /// `max_new_roles`, when written.
    pub max_new_roles: Option<std::ops::Range<usize>>,
    /// (role, provider) of each enabled capacity role profile.
    pub profiles: Vec<(String, String)>,
    /// The agents the play itself defines under `[agents]`.
    pub defined: Vec<String>,
}

pub const LEGACY_WARNING: &str = "this play has no [palette]: using the legacy roster (every active catalog role and user profile, all emission-capable, no expansion); this fallback is deprecated — declare [palette] roles";

impl PaletteConfig {
    /// The legacy fallback: the full active roster plus user profiles.
    pub fn legacy(
        pack: IndexMap<String, RoleConfig>,
        profiles: IndexMap<String, UserProfile>,
    ) -> Self {
        let mut roles: Vec<PaletteRole> = pack
            .iter()
            .filter(|(_, c)| c.active)
            .map(|(name, c)| PaletteRole {
                role: name.clone(),
                disposition: Disposition::EmissionCapable,
                modes: c.default_modes.clone(),
                setup: None,
            })
            .collect();
        roles.extend(profiles.iter().map(|(name, p)| PaletteRole {
            role: name.clone(),
            disposition: Disposition::EmissionCapable,
            modes: p.modes.clone(),
            setup: None,
        }));
        PaletteConfig {
            palette: PlayRolePalette {
                roles,
                expansion: PaletteExpansionPolicy::default(),
                defaults: None,
            },
            legacy: true,
            profiles,
            pack,
            simulate: PaletteSimulate::default(),
            sites: SetupSites::default(),
        }
    }

    /// The built-in pack, without overrides.
    pub fn builtin_pack() -> IndexMap<String, RoleConfig> {
        Catalog::builtin()
            .roles
            .iter()
            .map(|(n, r)| (n.clone(), r.pack.clone()))
            .collect()
    }

    pub fn initial(&self, role: &str) -> Option<&PaletteRole> {
        self.palette.roles.iter().find(|r| r.role == role)
    }

    /// Catalog roles a request may recruit: active, outside the palette.
    pub fn expansion_only_roles(&self) -> Vec<String> {
        self.pack
            .iter()
            .filter(|(name, c)| c.active && self.initial(name).is_none())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// D2: what planning sees.
    pub fn planning_context(&self) -> PalettePlanningContext {
        PalettePlanningContext {
            assignable_roles: self.palette.roles.iter().map(|r| r.role.clone()).collect(),
            expansion_only_roles: self.expansion_only_roles(),
            max_new_roles: self.palette.expansion.max_new_roles,
            orchestrator_may_expand: self.palette.expansion.orchestrator_may_expand,
        }
    }
}

/// ADR-0036 D2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PalettePlanningContext {
    pub assignable_roles: Vec<String>,
    pub expansion_only_roles: Vec<String>,
    pub max_new_roles: u32,
    pub orchestrator_may_expand: bool,
}

/// ADR-0036 D3: the persisted contract of palette state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PaletteSnapshot {
    pub initial_roles: Vec<String>,
    #[serde(default)]
    pub expanded_roles: Vec<String>,
    #[serde(default)]
    pub reserved_roles: Vec<String>,
    pub max_new_roles: u32,
    #[serde(default)]
    pub consumed_new_roles: u32,
}

/// ADR-0036 D1: why the router refused a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaletteRouteRejection {
    pub assignee: String,
    pub reason: DropReason,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_json_form() {
        let s = PaletteSnapshot {
            initial_roles: vec!["orchestrator".into()],
            expanded_roles: vec!["critic".into()],
            reserved_roles: vec![],
            max_new_roles: 2,
            consumed_new_roles: 1,
        };
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            json,
            r#"{"initial_roles":["orchestrator"],"expanded_roles":["critic"],"reserved_roles":[],"max_new_roles":2,"consumed_new_roles":1}"#
        );
        let minimal: PaletteSnapshot =
            serde_json::from_str(r#"{"initial_roles":["a"],"max_new_roles":0}"#).unwrap();
        assert_eq!(minimal.consumed_new_roles, 0);
    }

    #[test]
    fn legacy_roster_is_every_active_role_plus_profiles() {
        let mut profiles = IndexMap::new();
        profiles.insert(
            "house_style".into(),
            UserProfile {
                description: None,
                model: None,
                modes: vec![],
            },
        );
        let cfg = PaletteConfig::legacy(PaletteConfig::builtin_pack(), profiles);
        let names: Vec<&str> = cfg.palette.roles.iter().map(|r| r.role.as_str()).collect();
        assert!(names.contains(&"orchestrator") && names.contains(&"house_style"));
        assert!(
            !names.contains(&"incident_responder"),
            "inactive in the pack"
        );
        assert_eq!(cfg.palette.expansion.max_new_roles, 0);
    }
}
