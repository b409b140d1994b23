//! The person behind a surface that serves others. `playdeck web` sends a
//! command for a paired device; the run records that device — `web (ana,
//! device "pixel-7", 100.101.1.2)` — as who decided, in `operator_action`
//! and every approval's `by`, not the web process.
//!
//! A request names its device in a `via` field beside `cmd`. It is taken
//! only from a peer the socket already trusts to act (one that passed the
//! agent check) and that is this very playdeck binary serving `web`
//! ([`super::peer::actor_of`] names it so by its executable, not by what it
//! says of itself); anyone else who sends one is refused, so a script
//! cannot put a phone's name on its own decisions.

use serde::{Deserialize, Serialize};

use super::{ErrorCode, Failure};

/// The device a command is sent for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Via {
    /// The device's name, as it was paired (`pixel-7`).
    pub device: String,
    /// The address it connected from.
    pub from: std::net::IpAddr,
}

/// Longest device name (a name is for people; the pairing refuses longer).
pub const DEVICE_NAME_MAX: usize = 40;

/// Why `name` cannot name a device, or `None`: 1 to 40 characters, none a
/// control character or a quote (it is recorded inside quotes).
pub fn bad_device_name(name: &str) -> Option<String> {
    let n = name.chars().count();
    if n == 0 || n > DEVICE_NAME_MAX {
        return Some(format!(
            "device name {name:?} has {n} characters; allowed: 1 to {DEVICE_NAME_MAX}"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_control() || matches!(c, '"' | '\\'))
    {
        return Some(format!(
            "device name {name:?} holds {c:?}; allowed: printable characters other than quotes and backslashes"
        ));
    }
    None
}

#[derive(Deserialize)]
struct Carrier {
    #[serde(default)]
    via: Option<Via>,
}

/// Who a request `line` from the peer `by` (as [`super::peer::actor_of`]
/// named it) is recorded as: `Ok(None)` when it names no device (or comes
/// from an agent, which the agent check then refuses), the device when
/// the peer is `playdeck web`, and a refusal otherwise.
pub fn on_behalf(line: &str, by: &str, agent: bool) -> Result<Option<String>, Failure> {
    let via = match serde_json::from_str::<Carrier>(line.trim()) {
        Ok(Carrier { via: Some(v) }) => v,
        Ok(Carrier { via: None }) => return Ok(None),
        Err(e) => {
            return Err(Failure::new(
                ErrorCode::BadRequest,
                format!("not a control request: `via` {e}"),
            ));
        }
    };
    if agent {
        return Ok(None);
    }
    let Some(user) = by
        .strip_prefix("web (")
        .and_then(|r| r.split_once(", pid "))
        .map(|(u, _)| u)
    else {
        return Err(Failure::new(
            ErrorCode::BadRequest,
            format!(
                "refused: `via` names a device, and only `playdeck web` speaks for one (this request comes from {by})"
            ),
        ));
    };
    if let Some(why) = bad_device_name(&via.device) {
        return Err(Failure::new(ErrorCode::BadRequest, why));
    }
    Ok(Some(format!(
        "web ({user}, device \"{}\", {})",
        via.device, via.from
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str =
        r#"{"cmd":"approve","op":"a","via":{"device":"pixel-7","from":"100.101.1.2"}}"#;

    #[test]
    fn only_playdeck_web_speaks_for_a_device() {
        assert_eq!(
            on_behalf(LINE, "web (ana, pid 77)", false)
                .unwrap()
                .as_deref(),
            Some(r#"web (ana, device "pixel-7", 100.101.1.2)"#)
        );
        let e = on_behalf(LINE, "ctl (ana, pid 77)", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(e.message.contains("only `playdeck web`"), "{e}");
        // An agent's request goes on to be refused as an agent's.
        assert_eq!(on_behalf(LINE, "web (ana, pid 77)", true).unwrap(), None);
        assert_eq!(
            on_behalf(r#"{"cmd":"pause"}"#, "ctl (ana, pid 1)", false).unwrap(),
            None
        );
    }

    #[test]
    fn a_device_name_cannot_forge_the_record() {
        let line = r#"{"cmd":"pause","via":{"device":"x\", device \"y","from":"::1"}}"#;
        let e = on_behalf(line, "web (ana, pid 77)", false).unwrap_err();
        assert!(e.message.contains("quotes"), "{e}");
        let line = r#"{"cmd":"pause","via":{"device":"x","from":"not-an-ip"}}"#;
        assert!(on_behalf(line, "web (ana, pid 77)", false).is_err());
    }
}
