//! What a decision was made on. Every operator decision — approving or
//! denying a gate, answering an agent's question, landing a review,
//! resolving a conflict, retrying or sending back a failure — names the
//! state it answers, as the surface showed it: the signal that put the
//! operation before the operator (its `seq`) and, where it can change
//! without a new signal, what was shown of it (a gate's dependencies'
//! outcomes; a review's commits; a call's input digest). The run refuses a
//! decision whose basis is no longer what is there (`stale_decision`), so
//! a view seconds old never decides what nobody saw.
//!
//! A basis is one short token, the same in JSON, on a command line
//! (`--on review@340:1a2b3c4d5e6f..9f8e7d6c5b4a`) and in `ctl status`:
//! `KIND@SEQ[:WHAT]`. A gate's dependencies' outcomes are digested by
//! [`super::snapshot::deps_digest`].

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What kind of decision waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BasisKind {
    /// An approval gate (`approval = true`).
    Gate,
    /// A running agent's question about one call (a ToolSet's `ask`).
    Call,
    /// Work waiting for review before it lands.
    Review,
    /// Work that clashed as it landed.
    Conflict,
    /// A failed (or denied) operation, to retry or send back.
    Failure,
    /// An escalated operation, to retry.
    Escalation,
}

impl BasisKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BasisKind::Gate => "gate",
            BasisKind::Call => "call",
            BasisKind::Review => "review",
            BasisKind::Conflict => "conflict",
            BasisKind::Failure => "failure",
            BasisKind::Escalation => "escalation",
        }
    }

    /// How a sentence names it: `its approval gate`, `the call it asked about`.
    pub fn words(self) -> &'static str {
        match self {
            BasisKind::Gate => "its approval gate",
            BasisKind::Call => "the call its agent asked about",
            BasisKind::Review => "its work waiting for review",
            BasisKind::Conflict => "its merge conflict",
            BasisKind::Failure => "its failure",
            BasisKind::Escalation => "its escalation",
        }
    }

    const ALL: [BasisKind; 6] = [
        BasisKind::Gate,
        BasisKind::Call,
        BasisKind::Review,
        BasisKind::Conflict,
        BasisKind::Failure,
        BasisKind::Escalation,
    ];

    /// The basis kind of a question of `kind`.
    pub fn of_question(kind: super::agent::QuestionKind) -> BasisKind {
        use super::agent::QuestionKind;
        match kind {
            QuestionKind::Permission => BasisKind::Call,
            QuestionKind::Review => BasisKind::Review,
            QuestionKind::Conflict => BasisKind::Conflict,
        }
    }
}

/// The state a decision answers: `gate@120:3f2a9c1b`,
/// `review@340:1a2b3c4d5e6f..9f8e7d6c5b4a`, `call@342:Write:…`,
/// `failure@400`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Basis {
    pub kind: BasisKind,
    /// The signal that put the operation before the operator: a gate's
    /// `awaiting_approval`, a question's `permission_asked`, a failure's
    /// `failed`. A new one (asked again, failed again) is a new basis.
    pub seq: u64,
    /// What was shown of it that can change without a new signal, or
    /// that a script can check by eye: a gate's dependencies' outcomes
    /// (a digest), a review's commits (`base..tip`), a call's tool and
    /// input digest, a conflict's commits.
    pub what: Option<Arc<str>>,
}

/// Why a token is not a basis: the token and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{token:?} is not a decision's basis ({why}); write KIND@SEQ[:WHAT] as `ctl RUN status` lists it, KIND one of gate, call, review, conflict, failure, escalation"
)]
pub struct BasisError {
    pub token: String,
    pub why: &'static str,
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.kind.as_str(), self.seq)?;
        if let Some(w) = &self.what {
            write!(f, ":{w}")?;
        }
        Ok(())
    }
}

impl FromStr for Basis {
    type Err = BasisError;

    fn from_str(s: &str) -> Result<Basis, BasisError> {
        let bad = |why| BasisError {
            token: s.to_string(),
            why,
        };
        let (kind, rest) = s.split_once('@').ok_or_else(|| bad("no @"))?;
        let kind = BasisKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind)
            .ok_or_else(|| bad("unknown kind"))?;
        let (seq, what) = match rest.split_once(':') {
            Some((seq, what)) => (seq, Some(what)),
            None => (rest, None),
        };
        let seq = seq
            .parse::<u64>()
            .map_err(|_| bad("SEQ is not an event number"))?;
        if what.is_some_and(|w| w.is_empty() || w.len() > 512 || w.chars().any(char::is_control)) {
            return Err(bad("WHAT is empty, too long or holds a control character"));
        }
        Ok(Basis {
            kind,
            seq,
            what: what.map(Arc::from),
        })
    }
}

impl Serialize for Basis {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Basis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Basis, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A call's input, as a question's basis names it: the tool and the first
/// 16 hex digits of the SHA-256 of its input's JSON, so an answer allows
/// that call and no other.
pub fn call_digest(tool: &str, input: &serde_json::Value) -> String {
    let bytes = serde_json::to_vec(input).unwrap_or_default();
    let d = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex: String = d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    // The tool's name as the token can carry it: no ':' or control.
    let tool: String = tool
        .chars()
        .map(|c| if c == ':' || c.is_control() { '_' } else { c })
        .take(64)
        .collect();
    format!("{tool}:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_basis_reads_back_as_it_was_written() {
        for t in [
            "gate@120:3f2a9c1b",
            "review@340:1a2b3c4d5e6f..9f8e7d6c5b4a",
            "call@342:Write:0011223344556677",
            "failure@400",
            "escalation@7",
            "conflict@9:abc..def",
        ] {
            let b: Basis = t.parse().unwrap();
            assert_eq!(b.to_string(), t);
            let j = serde_json::to_string(&b).unwrap();
            assert_eq!(serde_json::from_str::<Basis>(&j).unwrap(), b);
        }
    }

    #[test]
    fn what_is_not_a_basis_is_named_with_what_is_allowed() {
        for (t, why) in [
            ("gate", "no @"),
            ("merge@1", "unknown kind"),
            ("gate@x", "SEQ"),
            ("gate@1:", "WHAT is empty"),
        ] {
            let e = t.parse::<Basis>().unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("KIND@SEQ"), "{t}: {e}");
        }
    }

    #[test]
    fn a_call_digest_names_the_tool_and_binds_the_whole_input() {
        let a = call_digest("Bash", &serde_json::json!({"command": "echo hi"}));
        let b = call_digest("Bash", &serde_json::json!({"command": "echo hi; rm -rf x"}));
        assert!(a.starts_with("Bash:") && a.len() == 5 + 16, "{a}");
        assert_ne!(a, b);
        assert!(call_digest("mcp:x", &serde_json::Value::Null).starts_with("mcp_x:"));
    }
}
