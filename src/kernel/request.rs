//! Live requests an operation may emit (ADR-0033 D3): `SpawnRequest` and
//! `EscalationRequest`, extracted recursively from results and from an
//! agent's stream. A request is a request, not authority: routing and
//! admission decide what becomes of it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use std::sync::Arc;

use serde_json::Value;

use super::graph::OperationKind;

/// A request's identity (emitter-local: content hash and kind). Written as
/// 16 hex digits; held as a number, so recording it costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

impl serde::Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:016x}", self.0))
    }
}

impl<'de> serde::Deserialize<'de> for RequestId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        u64::from_str_radix(&s, 16).map(RequestId).map_err(|_| {
            serde::de::Error::custom(format!("{s:?} is not a request identity (16 hex digits)"))
        })
    }
}

/// How deep extraction looks (the result itself is depth 0). Inherited from
/// the spec as a defensive recursion cap.
pub const EXTRACT_MAX_DEPTH: usize = 4;

pub const SPAWN_KEY: &str = "spawn_request";
pub const ESCALATION_KEY: &str = "escalation";

#[derive(Debug, Clone, PartialEq)]
pub struct SpawnRequest {
    /// Shared, so the operation built from it needs no copy.
    pub instruction: Arc<str>,
    pub assignee: Option<String>,
    pub operation: OperationKind,
    pub independent: bool,
    pub reason: Option<String>,
}

impl SpawnRequest {
    pub fn new(instruction: impl Into<Arc<str>>) -> Self {
        SpawnRequest {
            instruction: instruction.into(),
            assignee: None,
            operation: OperationKind::Operate,
            independent: false,
            reason: None,
        }
    }

    pub fn to(mut self, assignee: impl Into<String>) -> Self {
        self.assignee = Some(assignee.into());
        self
    }

    /// Parses the object found under `spawn_request`. Returns the request
    /// and, when `operation` was outside the allowlist, the warning that the
    /// fallback to `operate` must log.
    pub fn from_value(v: &Value) -> Result<(SpawnRequest, Option<String>), RequestError> {
        let Value::Object(m) = v else {
            return Err(RequestError::NotAnObject(type_name(v)));
        };
        // One pass over the fields: a request is read once per sighting, and
        // there may be a hundred thousand of them.
        let (mut instruction, mut assignee, mut reason, mut operation) = (None, None, None, None);
        let mut independent = false;
        for (k, val) in m {
            match k.as_str() {
                "instruction" => match val {
                    Value::String(s) => instruction = Some(Arc::from(s.as_str())),
                    other => return Err(RequestError::wrong("instruction", "a string", other)),
                },
                "assignee" => assignee = opt_string("assignee", val)?,
                "reason" => reason = opt_string("reason", val)?,
                "operation" => operation = opt_string("operation", val)?,
                "independent" => match val {
                    Value::Null => {}
                    Value::Bool(b) => independent = *b,
                    other => return Err(RequestError::wrong("independent", "a boolean", other)),
                },
                _ => {}
            }
        }
        let instruction = instruction.ok_or(RequestError::MissingInstruction)?;
        let assignee = assignee
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let mut warning = None;
        let operation = match operation {
            None => OperationKind::Operate,
            Some(op) => match OperationKind::parse(&op) {
                Some(k) => k,
                None => {
                    warning = Some(format!(
                        "spawn request asked for operation {op:?}, which is not allowed; using \"operate\" (allowed: {})",
                        OperationKind::ALLOWED.join(", ")
                    ));
                    OperationKind::Operate
                }
            },
        };
        Ok((
            SpawnRequest {
                instruction,
                assignee,
                operation,
                independent,
                reason,
            },
            warning,
        ))
    }
}

/// A spawn request that cannot be read: the field at fault, what it must
/// be and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("invalid spawn request: expected an object, found {0}")]
    NotAnObject(&'static str),
    #[error("invalid spawn request: {field} must be {expected}, found {found}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    #[error("invalid spawn request: missing instruction")]
    MissingInstruction,
}

impl RequestError {
    fn wrong(field: &'static str, expected: &'static str, found: &Value) -> Self {
        RequestError::WrongType {
            field,
            expected,
            found: type_name(found),
        }
    }
}

fn opt_string(key: &'static str, v: &Value) -> Result<Option<String>, RequestError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(RequestError::wrong(key, "a string", other)),
    }
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The reason of an escalation: `{ reason = "..." }` or a bare string.
pub fn escalation_reason(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => match m.get("reason") {
            Some(Value::String(s)) => s.clone(),
            _ => "escalated".into(),
        },
        _ => "escalated".into(),
    }
}

/// Raw requests found in a value, in document order, borrowed from it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extracted<'a> {
    pub spawns: Vec<&'a Value>,
    pub escalations: Vec<&'a Value>,
}

impl Extracted<'_> {
    pub fn is_empty(&self) -> bool {
        self.spawns.is_empty() && self.escalations.is_empty()
    }
}

/// Extracts requests from `v`: an object holding `spawn_request` (an object
/// or an array of them) or `escalation` contributes them; any other value
/// in an object or array is searched, down to [`EXTRACT_MAX_DEPTH`].
pub fn extract(v: &Value) -> Extracted<'_> {
    let mut out = Extracted::default();
    extract_into(v, 0, &mut out);
    out
}

fn extract_into<'a>(v: &'a Value, depth: usize, out: &mut Extracted<'a>) {
    if depth > EXTRACT_MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                match k.as_str() {
                    SPAWN_KEY => push_requests(val, &mut out.spawns),
                    ESCALATION_KEY => push_requests(val, &mut out.escalations),
                    _ => extract_into(val, depth + 1, out),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                extract_into(item, depth + 1, out);
            }
        }
        _ => {}
    }
}

fn push_requests<'a>(v: &'a Value, into: &mut Vec<&'a Value>) {
    match v {
        Value::Array(items) => into.extend(items.iter()),
        Value::Null => {}
        other => into.push(other),
    }
}

/// The identity of a request for deduplication. JSON has no object
/// identity, so two sightings are "the same request" when their content is
/// equal, key order aside.
pub fn identity(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    hash_canonical(v, &mut h);
    h.finish()
}

fn hash_canonical(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            for item in items {
                hash_canonical(item, h);
            }
        }
        Value::Object(m) => {
            (5u8, m.len()).hash(h);
            // Requests have a handful of keys: sort them on the stack.
            let mut small: [(&str, &Value); 8] = [("", &Value::Null); 8];
            if m.len() <= small.len() {
                for (slot, (k, v)) in small.iter_mut().zip(m) {
                    *slot = (k.as_str(), v);
                }
                let entries = &mut small[..m.len()];
                entries.sort_unstable_by_key(|(k, _)| *k);
                for (k, v) in entries.iter() {
                    k.hash(h);
                    hash_canonical(v, h);
                }
            } else {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_unstable_by_key(|(k, _)| *k);
                for (k, v) in entries {
                    k.hash(h);
                    hash_canonical(v, h);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nest(depth: usize, leaf: Value) -> Value {
        (0..depth).fold(leaf, |acc, i| json!({ format!("k{i}"): acc }))
    }

    #[test]
    fn finds_requests_down_to_depth_four_and_no_deeper() {
        let req = json!({"spawn_request": {"instruction": "x"}});
        for depth in 0..=EXTRACT_MAX_DEPTH {
            assert_eq!(
                extract(&nest(depth, req.clone())).spawns.len(),
                1,
                "depth {depth}"
            );
        }
        assert!(extract(&nest(EXTRACT_MAX_DEPTH + 1, req)).spawns.is_empty());
    }

    #[test]
    fn arrays_count_as_a_level() {
        let req = json!({"spawn_request": {"instruction": "x"}});
        // [[[[req]]]] puts the request object at depth 4.
        let v = json!([[[[req]]]]);
        assert_eq!(extract(&v).spawns.len(), 1);
        let v = json!([[[[[req]]]]]);
        assert!(extract(&v).spawns.is_empty());
    }

    #[test]
    fn arrays_of_requests_and_escalations() {
        let v = json!({
            "summary": "ok",
            "spawn_request": [{"instruction": "a"}, {"instruction": "b"}],
            "nested": {"escalation": {"reason": "need a human"}}
        });
        let e = extract(&v);
        assert_eq!(e.spawns.len(), 2);
        assert_eq!(e.escalations.len(), 1);
        assert_eq!(escalation_reason(e.escalations[0]), "need a human");
    }

    #[test]
    fn operation_outside_allowlist_falls_back_with_warning() {
        let (req, warn) =
            SpawnRequest::from_value(&json!({"instruction": "x", "operation": "rm_rf"})).unwrap();
        assert_eq!(req.operation, OperationKind::Operate);
        assert!(warn.unwrap().contains("\"rm_rf\""));
        for ok in OperationKind::ALLOWED {
            let (req, warn) =
                SpawnRequest::from_value(&json!({"instruction": "x", "operation": ok})).unwrap();
            assert_eq!(req.operation.as_str(), ok);
            assert!(warn.is_none());
        }
    }

    #[test]
    fn malformed_requests_are_errors_that_name_the_field_and_what_was_found() {
        let err = |v: Value| SpawnRequest::from_value(&v).unwrap_err().to_string();
        assert_eq!(
            err(json!("x")),
            "invalid spawn request: expected an object, found a string"
        );
        assert_eq!(err(json!({})), "invalid spawn request: missing instruction");
        assert_eq!(
            err(json!({"instruction": 3})),
            "invalid spawn request: instruction must be a string, found a number"
        );
        assert_eq!(
            err(json!({"instruction": "x", "independent": "yes"})),
            "invalid spawn request: independent must be a boolean, found a string"
        );
        assert_eq!(
            err(json!({"instruction": "x", "assignee": []})),
            "invalid spawn request: assignee must be a string, found an array"
        );
    }

    #[test]
    fn identity_ignores_key_order() {
        use serde_json::Map;
        let a = json!({"instruction": "x", "assignee": "tester"});
        let mut m = Map::new();
        m.insert("assignee".into(), json!("tester"));
        m.insert("instruction".into(), json!("x"));
        assert_eq!(identity(&a), identity(&Value::Object(m)));
        assert_ne!(
            identity(&a),
            identity(&json!({"instruction": "y", "assignee": "tester"}))
        );
    }
}
