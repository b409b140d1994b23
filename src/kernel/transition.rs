//! How signals move an operation between lanes: the one rule the
//! executor, the projection and every view apply alike.

use super::lane::Lane;
use super::signal::SignalKind;

/// The lane after `signal`, given the lane before it. Lanes start at
/// `queued`; terminal lanes are sticky until a `queued` or `started` signal
/// explicitly begins another attempt. Signals that are not about a lane
/// (held, spawned, run-level ones) leave it unchanged.
pub fn lane_for(prev: Lane, signal: &SignalKind) -> Lane {
    let next = match signal {
        SignalKind::Queued { .. }
        | SignalKind::Unpaused { .. }
        | SignalKind::Approved { .. }
        | SignalKind::DependenciesAdded { .. }
        | SignalKind::Retried { .. }
        | SignalKind::RetryScheduled { .. } => Lane::Queued,
        SignalKind::Started { .. } => Lane::Running,
        SignalKind::AwaitingApproval { .. } | SignalKind::PermissionAsked { .. } => {
            Lane::AwaitingApproval
        }
        // Answered, it runs on.
        SignalKind::PermissionAnswered { .. } if prev == Lane::AwaitingApproval => Lane::Running,
        SignalKind::Paused { .. } => Lane::Paused,
        SignalKind::Completed { .. } => Lane::Succeeded,
        SignalKind::Failed { .. } | SignalKind::Skipped { .. } | SignalKind::Denied { .. } => {
            Lane::Failed
        }
        SignalKind::Escalated { .. } => Lane::Escalated,
        _ => return prev,
    };
    let new_attempt = matches!(
        signal,
        SignalKind::Queued { .. } | SignalKind::Started { .. } | SignalKind::Retried { .. }
    );
    if prev.is_terminal() && !new_attempt {
        prev
    } else {
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Lane;
    use crate::kernel::signal::{NodeHeader, PauseReason};
    use std::sync::Arc;

    fn header() -> NodeHeader {
        NodeHeader {
            op_id: uuid::Uuid::nil(),
            name: "n".into(),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
            pos: crate::kernel::log_line::NO_POS,
        }
    }

    #[test]
    fn lifecycle_moves_through_lanes() {
        let mut lane = Lane::Queued;
        lane = lane_for(lane, &SignalKind::AwaitingApproval { node: header() });
        assert_eq!(lane, Lane::AwaitingApproval);
        lane = lane_for(
            lane,
            &SignalKind::Approved {
                node: header(),
                by: "op".into(),
                on: None,
            },
        );
        assert_eq!(lane, Lane::Queued);
        lane = lane_for(
            lane,
            &SignalKind::Paused {
                node: header(),
                reason: PauseReason::RunPaused,
            },
        );
        assert_eq!(lane, Lane::Paused);
        lane = lane_for(lane, &SignalKind::Unpaused { node: header() });
        assert_eq!(lane, Lane::Queued);
        lane = lane_for(
            lane,
            &SignalKind::Started {
                node: header(),
                attempt: 1,
                role: None,
                instance: None,
            },
        );
        assert_eq!(lane, Lane::Running);
        lane = lane_for(
            lane,
            &SignalKind::Completed {
                node: header(),
                result: Arc::new(serde_json::Value::Null),
            },
        );
        assert_eq!(lane, Lane::Succeeded);
    }

    #[test]
    fn terminal_lanes_are_sticky_until_a_new_attempt() {
        let done = Lane::Failed;
        assert_eq!(
            lane_for(
                done,
                &SignalKind::Paused {
                    node: header(),
                    reason: PauseReason::Held
                }
            ),
            Lane::Failed
        );
        assert_eq!(
            lane_for(done, &SignalKind::Unpaused { node: header() }),
            Lane::Failed
        );
        assert_eq!(
            lane_for(
                Lane::Succeeded,
                &SignalKind::Escalated {
                    node: header(),
                    reason: "x".into(),
                    result: Arc::new(serde_json::Value::Null)
                }
            ),
            Lane::Succeeded
        );
        assert_eq!(
            lane_for(
                done,
                &SignalKind::Queued {
                    node: header(),
                    role: None,
                    instruction: "i".into(),
                    approval: false
                }
            ),
            Lane::Queued
        );
        assert_eq!(
            lane_for(
                done,
                &SignalKind::Started {
                    node: header(),
                    attempt: 2,
                    role: None,
                    instance: None,
                }
            ),
            Lane::Running
        );
    }

    #[test]
    fn skipped_and_denied_land_in_failed() {
        use crate::kernel::signal::SkipReason;
        assert_eq!(
            lane_for(
                Lane::Queued,
                &SignalKind::Skipped {
                    node: header(),
                    reason: SkipReason::NoValidPath,
                    because: None,
                }
            ),
            Lane::Failed
        );
        assert_eq!(
            lane_for(
                Lane::AwaitingApproval,
                &SignalKind::Denied {
                    node: header(),
                    by: "op".into(),
                    reason: "no".into(),
                    on: None,
                }
            ),
            Lane::Failed
        );
    }
}
