//! Breakpoints: where a run pauses by itself, for a developer stepping
//! through a graph — before an operation (or any of a role's) starts, or
//! when a spawn, an escalation or a failure happens. The run pauses as the
//! operator's pause does (running work finishes, nothing new starts), with
//! the cause said; `step` and `resume` go on from there.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// One breakpoint, as written: `impl-api` (or `op:impl-api`),
/// `role:tester`, `spawn`, `escalation`, `failure`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Breakpoint {
    /// Before this operation starts.
    Op(Arc<str>),
    /// Before any operation of this role starts.
    Role(Arc<str>),
    /// When a spawn request is accepted.
    Spawn,
    /// When an operation escalates.
    Escalation,
    /// When an operation fails for good (not an attempt that is retried).
    Failure,
}

/// What a breakpoint may be, for messages.
pub const BREAKPOINT_FORMS: &str = "an operation's name (op:NAME when it is one of these words), role:ROLE, spawn, escalation or failure";

impl FromStr for Breakpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let name = |n: &str, what: &str| {
            if crate::vocab::is_valid_name(n) {
                Ok(Arc::from(n))
            } else {
                Err(format!(
                    "breakpoint {s:?}: {n:?} is not {what}; a breakpoint is {BREAKPOINT_FORMS}"
                ))
            }
        };
        match s {
            "spawn" => Ok(Breakpoint::Spawn),
            "escalation" => Ok(Breakpoint::Escalation),
            "failure" => Ok(Breakpoint::Failure),
            _ => {
                if let Some(r) = s.strip_prefix("role:") {
                    name(r, "a role's name").map(Breakpoint::Role)
                } else {
                    name(s.strip_prefix("op:").unwrap_or(s), "an operation's name")
                        .map(Breakpoint::Op)
                }
            }
        }
    }
}

impl fmt::Display for Breakpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breakpoint::Op(n) if matches!(&**n, "spawn" | "escalation" | "failure") => {
                write!(f, "op:{n}")
            }
            Breakpoint::Op(n) => f.write_str(n),
            Breakpoint::Role(r) => write!(f, "role:{r}"),
            Breakpoint::Spawn => f.write_str("spawn"),
            Breakpoint::Escalation => f.write_str("escalation"),
            Breakpoint::Failure => f.write_str("failure"),
        }
    }
}

impl serde::Serialize for Breakpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Breakpoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakpoints_read_and_write_as_typed() {
        for s in [
            "impl-api",
            "role:tester",
            "spawn",
            "escalation",
            "failure",
            "op:spawn",
        ] {
            let b: Breakpoint = s.parse().unwrap();
            assert_eq!(b.to_string(), s);
        }
        assert_eq!(
            "op:impl-api".parse::<Breakpoint>().unwrap().to_string(),
            "impl-api"
        );
        let e = "role:".parse::<Breakpoint>().unwrap_err();
        assert!(
            e.contains("is not a role's name") && e.contains("role:ROLE"),
            "{e}"
        );
        assert!("no spaces".parse::<Breakpoint>().is_err());
    }
}
