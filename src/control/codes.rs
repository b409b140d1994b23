//! The control protocol's error codes: machine-readable, the same on
//! every surface (`ctl`, the control socket, stdin control lines, a
//! console's answers). The kernel's refusals map onto them here, beside
//! the protocol's other codes (a run that is not live, a peer that is one
//! of the run's agents, a read-only console).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::kernel::CommandError;

/// Machine-readable error codes, the same on every surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    UnknownOperation,
    NoApprovalGate,
    AlreadyDecided,
    CannotHold,
    NotHeld,
    NotPaused,
    NotWaiting,
    RunFinished,
    CannotRetry,
    CannotSay,
    NoQuestion,
    NoConflict,
    /// A decision whose basis changed before it arrived: what changed and
    /// what is there now are in the message; ask again.
    StaleDecision,
    /// A control line or request that is not a command.
    BadRequest,
    NoCapacity,
    UnknownProfile,
    DuplicateProfile,
    OverMaxInstances,
    OverMaxNodes,
    BadProfile,
    /// The run is not live (no control socket answers).
    NotLive,
    /// No such run directory.
    NoRun,
    Io,
    /// The run is not reactive: nothing can join it.
    NotReactive,
    /// Admission dropped what was added (the ledger has the row).
    Dropped,
    /// A release named an instance the run does not have.
    UnknownInstance,
    /// The request came from one of the run's own agent processes.
    PeerIsAgent,
    /// A read-only console (`attach --read-only`) asked for a change.
    ReadOnly,
    /// The run has as many watchers as it serves.
    TooManyWatchers,
    /// A code this build does not know (a newer peer).
    #[serde(other)]
    Other,
}

impl ErrorCode {
    /// Mistakes in what was typed exit 2; refusals and runs that are not
    /// live exit 1.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorCode::NoRun
            | ErrorCode::BadRequest
            | ErrorCode::UnknownProfile
            | ErrorCode::DuplicateProfile
            | ErrorCode::OverMaxInstances
            | ErrorCode::OverMaxNodes
            | ErrorCode::BadProfile
            | ErrorCode::UnknownInstance => 2,
            _ => 1,
        }
    }

    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "other".into())
    }
}

impl From<&CommandError> for ErrorCode {
    fn from(e: &CommandError) -> ErrorCode {
        match e {
            CommandError::UnknownOperation(_) => ErrorCode::UnknownOperation,
            CommandError::NoApprovalGate { .. } => ErrorCode::NoApprovalGate,
            CommandError::AlreadyDecided { .. } => ErrorCode::AlreadyDecided,
            CommandError::CannotHold { .. } => ErrorCode::CannotHold,
            CommandError::NotHeld { .. } => ErrorCode::NotHeld,
            CommandError::NotPaused => ErrorCode::NotPaused,
            CommandError::NotWaiting { .. } => ErrorCode::NotWaiting,
            CommandError::RunFinished => ErrorCode::RunFinished,
            CommandError::CannotRetry { .. } | CommandError::BuiltOn { .. } => {
                ErrorCode::CannotRetry
            }
            CommandError::CannotSay { .. } => ErrorCode::CannotSay,
            CommandError::NoQuestion { .. } => ErrorCode::NoQuestion,
            CommandError::StaleDecision { .. } => ErrorCode::StaleDecision,
            CommandError::NoConflict { .. } => ErrorCode::NoConflict,
            CommandError::BadRequest(_) => ErrorCode::BadRequest,
            CommandError::NoCapacity => ErrorCode::NoCapacity,
            CommandError::NotReactive => ErrorCode::NotReactive,
            CommandError::Dropped { .. } => ErrorCode::Dropped,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_unknown_ones_survive() {
        assert_eq!(ErrorCode::UnknownOperation.as_str(), "unknown_operation");
        let c: ErrorCode = serde_json::from_str("\"from_the_future\"").unwrap();
        assert_eq!(c, ErrorCode::Other);
        assert_eq!(ErrorCode::BadRequest.exit_code(), 2);
        assert_eq!(ErrorCode::RunFinished.exit_code(), 1);
    }
}
