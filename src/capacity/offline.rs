//! Capacity commands against a finished run: they read and update its
//! `capacity.json` directly, with the same release rule as a live run.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::state::{
    CapacityError, CapacityFile, InstanceState, ReleaseResult, RequestRecord, StatusResult, now,
    release_records,
};
use super::workspace;
use crate::store::write_atomic;

pub fn capacity_path(run_dir: &Path) -> PathBuf {
    run_dir.join("capacity.json")
}

pub fn read(run_dir: &Path) -> Result<CapacityFile, CapacityError> {
    let path = capacity_path(run_dir);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CapacityError::new(
            "missing",
            format!(
                "no capacity state at {} ({e}); does the play have [capacity]?",
                path.display()
            ),
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        CapacityError::new(
            "corrupt",
            format!("{} is not a capacity state file: {e}", path.display()),
        )
    })
}

pub fn status(run_dir: &Path) -> Result<StatusResult, CapacityError> {
    let file = read(run_dir)?;
    let mut blocked = Vec::new();
    for a in file.agents.iter().filter(|a| a.state.is_active()) {
        if let Some(r) = &a.retained {
            blocked.push(format!("{} retained: {}", a.name, r.reason));
        }
    }
    Ok(StatusResult {
        status: "ok".into(),
        loop_id: file.loop_id.clone(),
        capacity_ref: capacity_path(run_dir).display().to_string(),
        state: file.status,
        live: false,
        max_nodes: file.max_nodes,
        active_nodes: file.agents.iter().filter(|a| a.state.is_active()).count(),
        agents: file.agents,
        waiting: Default::default(),
        desired: Default::default(),
        blocked,
    })
}

/// Releases every idle instance of a finished run (its `manual_release`
/// instances, typically) and removes their worktrees.
pub fn release(run_dir: &Path) -> Result<ReleaseResult, CapacityError> {
    let mut file = read(run_dir)?;
    let before: Vec<InstanceState> = file.agents.iter().map(|a| a.state).collect();
    let capacity_ref = capacity_path(run_dir).display().to_string();
    let result = release_records(
        &mut file.agents,
        |_| true,
        |_| 0,
        &file.loop_id,
        &capacity_ref,
    );
    if let Some(repo) = file.repo_root.as_deref().map(Path::new) {
        for (i, a) in file.agents.iter().enumerate() {
            let newly = before[i] != InstanceState::Released && a.state == InstanceState::Released;
            let (Some(path), Some(branch)) = (&a.placement.workspace, &a.placement.branch) else {
                continue;
            };
            // A shared worktree goes only with its last instance.
            let shared = file
                .agents
                .iter()
                .any(|o| o.state.is_active() && o.placement.workspace.as_ref() == Some(path));
            if newly && !shared {
                workspace::remove_worktree(repo, Path::new(path), Some(branch))
                    .map_err(|e| CapacityError::new("workspace", e))?;
            }
        }
    }
    file.status = CapacityFile::status_of(&file.agents);
    file.updated_at = now();
    file.requests.push(RequestRecord {
        kind: "release".into(),
        at: now(),
        detail: json!({"trigger": "operator", "released": result.released, "retained": result.retained}),
    });
    let mut bytes = serde_json::to_vec_pretty(&file).expect("serialisable");
    bytes.push(b'\n');
    write_atomic(&capacity_path(run_dir), &bytes)
        .map_err(|e| CapacityError::new("io", format!("cannot write {capacity_ref}: {e}")))?;
    let event = json!({"at": now(), "event": "release", "detail": {"trigger": "operator", "released": result.released}});
    let _ = append_event(run_dir, &event);
    Ok(result)
}

fn append_event(run_dir: &Path, event: &serde_json::Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = crate::store::append_private(&run_dir.join("capacity.events.jsonl"))?;
    writeln!(f, "{event}")
}
