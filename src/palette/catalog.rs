//! The closed built-in catalog ("casts") of behavioural roles and modes,
//! with each role's pack defaults. Embedded and read once.

use std::sync::OnceLock;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

const CATALOG_TOML: &str = include_str!("catalog.toml");

/// The only expansion source a play may name (ADR-0036 D1 rule 7).
pub const CATALOG_NAME: &str = "casts";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub const ALLOWED: [&'static str; 3] = ["low", "medium", "high"];

    pub fn parse(s: &str) -> Option<Effort> {
        match s {
            "low" => Some(Effort::Low),
            "medium" => Some(Effort::Medium),
            "high" => Some(Effort::High),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

/// A role's pack overlay: model, effort, modes and roster membership.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    pub model: Option<String>,
    pub effort: Option<Effort>,
    #[serde(default)]
    pub default_modes: Vec<String>,
    /// Modes this role may use; empty allows every catalog mode.
    #[serde(default)]
    pub modes_allow: Vec<String>,
    /// Membership of the ambient (legacy) roster; an explicit palette entry
    /// wins over it.
    #[serde(default = "yes")]
    pub active: bool,
}

fn yes() -> bool {
    true
}

impl RoleConfig {
    pub fn allows(&self, mode: &str) -> bool {
        self.modes_allow.is_empty() || self.modes_allow.iter().any(|m| m == mode)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleDef {
    pub description: String,
    /// The typed results the role emits.
    pub emits: Vec<String>,
    pub pack: RoleConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeDef {
    pub description: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    pub modes: IndexMap<String, ModeDef>,
    pub roles: IndexMap<String, RoleDef>,
}

impl Catalog {
    pub fn builtin() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| toml::from_str(CATALOG_TOML).expect("the built-in catalog parses"))
    }

    pub fn role(&self, name: &str) -> Option<&RoleDef> {
        self.roles.get(name)
    }

    pub fn has_mode(&self, name: &str) -> bool {
        self.modes.contains_key(name)
    }

    pub fn role_names(&self) -> Vec<&str> {
        self.roles.keys().map(String::as_str).collect()
    }

    pub fn mode_names(&self) -> Vec<&str> {
        self.modes.keys().map(String::as_str).collect()
    }
}

/// The canonical form of a role or mode name: trimmed, lower case, with
/// `-` and spaces as `_` ("Security-Auditor" is `security_auditor`).
pub fn canonical(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_complete_and_consistent() {
        let c = Catalog::builtin();
        assert!(c.roles.len() >= 15, "{} roles", c.roles.len());
        assert!(c.modes.len() >= 8, "{} modes", c.modes.len());
        for must in [
            "orchestrator",
            "planner",
            "researcher",
            "architect",
            "implementer",
            "tester",
            "reviewer",
            "critic",
            "security_auditor",
        ] {
            assert!(c.role(must).is_some(), "{must}");
        }
        for (name, role) in &c.roles {
            assert_eq!(canonical(name), *name);
            assert!(
                !role.description.is_empty() && !role.emits.is_empty(),
                "{name}"
            );
            for m in role.pack.default_modes.iter().chain(&role.pack.modes_allow) {
                assert!(c.has_mode(m), "{name}: unknown mode {m}");
            }
            for m in &role.pack.default_modes {
                assert!(role.pack.allows(m), "{name}: default mode {m} not allowed");
            }
        }
    }

    #[test]
    fn canonical_names() {
        assert_eq!(canonical(" Security-Auditor "), "security_auditor");
        assert_eq!(canonical("test first"), "test_first");
    }
}
