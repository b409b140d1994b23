//! Capacity commands against a finished run: they read and update its
//! `capacity.json` directly, with the same release rule as a live run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::state::{
    CapacityError, CapacityFile, InstanceState, ReleaseResult, RequestRecord, RetainFields,
    RetainedEntry, Selection, Standing, StatusResult, UNCOMMITTED_CHANGES, now, plan_release,
    retain_working, settle_idle,
};
use super::workspace;
use crate::files::write_atomic;
use crate::vocab::Lifetime;

pub fn capacity_path(run_dir: &Path) -> PathBuf {
    run_dir.join("capacity.json")
}

/// A finished run's capacity state; a missing file is an error here.
pub fn read(run_dir: &Path) -> Result<CapacityFile, CapacityError> {
    read_existing(run_dir)?.ok_or_else(|| {
        CapacityError::new(
            "missing",
            format!(
                "no capacity state at {}; does the play have [capacity]?",
                capacity_path(run_dir).display()
            ),
        )
    })
}

/// The capacity state of a run, if it has one. A file that is damaged or
/// of another schema is an error naming it, never replaced.
pub fn read_existing(run_dir: &Path) -> Result<Option<CapacityFile>, CapacityError> {
    use super::state::{RECORD_TYPE, SCHEMA_VERSION};
    let path = capacity_path(run_dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CapacityError::new(
                "io",
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    };
    // The schema first: a newer file is named as such, not as damaged.
    #[derive(serde::Deserialize)]
    struct Head {
        schema_version: Option<serde_json::Value>,
        record_type: Option<serde_json::Value>,
    }
    if let Ok(h) = serde_json::from_slice::<Head>(&bytes) {
        let version = h
            .schema_version
            .as_ref()
            .and_then(serde_json::Value::as_u64);
        if version != Some(u64::from(SCHEMA_VERSION))
            || h.record_type.as_ref().and_then(serde_json::Value::as_str) != Some(RECORD_TYPE)
        {
            return Err(CapacityError::new(
                "corrupt",
                format!(
                    "{}: schema_version {} / record_type {} is not one this playdeck reads (it reads {SCHEMA_VERSION} / {RECORD_TYPE:?}); nothing was changed",
                    path.display(),
                    h.schema_version.map_or("missing".into(), |v| v.to_string()),
                    h.record_type.map_or("missing".into(), |v| v.to_string()),
                ),
            ));
        }
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        CapacityError::new(
            "corrupt",
            format!(
                "{}:{}:{}: the capacity file is damaged ({e}); nothing was changed",
                path.display(),
                e.line(),
                e.column()
            ),
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

/// Releases instances of a run that is not live, in its `capacity.json`,
/// by the rule a live run follows: those of `lifetimes` and those in
/// `names`; with neither, the lifetimes due — `current_round` and
/// `current_loop` for a finished run, `current_round` for one that
/// stopped and may be resumed. That is how a `manual_release` or pinned
/// instance goes after the run: by name, or by asking for its lifetime.
/// The run's processes are gone, so an instance the file shows starting
/// is idle; a worktree that holds uncommitted work stays, with the reason
/// `uncommitted_changes`. Worktrees of released instances are removed.
/// `dry_run`: what it would do, with nothing written, removed or logged.
pub fn release(
    run_dir: &Path,
    lifetimes: &[Lifetime],
    names: &[String],
    dry_run: bool,
) -> Result<ReleaseResult, CapacityError> {
    let mut file = read(run_dir)?;
    let due: &[Lifetime] = if file.run_finished {
        &[Lifetime::CurrentRound, Lifetime::CurrentLoop]
    } else {
        &[Lifetime::CurrentRound]
    };
    let sel = Selection::new(lifetimes, names, due);
    sel.check_names(&file.agents)?;
    let before: Vec<InstanceState> = file.agents.iter().map(|a| a.state).collect();
    let capacity_ref = capacity_path(run_dir).display().to_string();
    let plan = plan_release(&file.agents, &sel, |_, a| match a.state {
        // Nobody is adding its worktree any more.
        InstanceState::Ready | InstanceState::Planned | InstanceState::Starting => Standing::Idle,
        _ => Standing::Working("busy"),
    });
    let mut retained = retain_working(&mut file.agents, &plan, |_| 0);
    let dirty: HashMap<PathBuf, String> = plan
        .checks
        .iter()
        .filter_map(|(path, _)| workspace::uncommitted(path).map(|d| (path.clone(), d)))
        .collect();
    let (mut released, kept) = settle_idle(&mut file.agents, &plan, &dirty, |_| 0);
    retained.extend(kept);
    if dry_run {
        return Ok(ReleaseResult::new(
            &sel,
            &file.loop_id,
            &capacity_ref,
            released,
            retained,
        ));
    }
    if let Some(repo) = file.repo_root.clone() {
        let mut done: Vec<String> = Vec::new();
        for (i, was) in before.iter().enumerate() {
            let a = &file.agents[i];
            let newly = *was != InstanceState::Released && a.state == InstanceState::Released;
            let (Some(path), Some(branch)) =
                (a.placement.workspace.clone(), a.placement.branch.clone())
            else {
                continue;
            };
            // A shared worktree goes only with its last instance.
            let shared = file
                .agents
                .iter()
                .any(|o| o.state.is_active() && o.placement.workspace.as_ref() == Some(&path));
            if !newly || shared || done.contains(&path) {
                continue;
            }
            done.push(path.clone());
            let event = match workspace::remove_worktree(
                Path::new(&repo),
                Path::new(&path),
                Some(&branch),
            ) {
                Ok(r) => {
                    json!({"at": now(), "event": "worktree_removed", "path": path, "branch": branch, "branch_kept": r.branch_kept})
                }
                // Work appeared after the check: git kept the worktree, and
                // so does the record.
                Err(e) => {
                    let e = e.to_string();
                    let a = &mut file.agents[i];
                    a.state = InstanceState::Ready;
                    a.retained = Some(RetainFields {
                        reason: UNCOMMITTED_CHANGES.into(),
                        runtime_state: "idle".into(),
                        queue_depth: 0,
                        detail: Some(e.clone()),
                    });
                    released.retain(|n| n != &a.name);
                    retained.push(RetainedEntry {
                        name: a.name.clone(),
                        reason: UNCOMMITTED_CHANGES.into(),
                        runtime_state: "idle".into(),
                        queue_depth: 0,
                        detail: Some(e.clone()),
                    });
                    json!({"at": now(), "event": "worktree_kept", "path": path, "detail": e})
                }
            };
            let _ = append_event(run_dir, &event);
        }
    }
    let result = ReleaseResult::new(&sel, &file.loop_id, &capacity_ref, released, retained);
    file.status = CapacityFile::status_of(&file.agents);
    file.updated_at = now();
    let detail = json!({
        "trigger": "operator",
        "lifetimes": result.lifetimes,
        "names": result.names,
        "status": result.status,
        "released": result.released,
        "retained": result.retained,
    });
    file.requests.push(RequestRecord {
        kind: "release".into(),
        at: now(),
        detail: detail.clone(),
    });
    let mut bytes = serde_json::to_vec_pretty(&file).expect("serialisable");
    bytes.push(b'\n');
    write_atomic(&capacity_path(run_dir), &bytes)
        .map_err(|e| CapacityError::new("io", format!("cannot write {capacity_ref}: {e}")))?;
    let event = json!({"at": now(), "event": "release", "detail": detail});
    let _ = append_event(run_dir, &event);
    Ok(result)
}

fn append_event(run_dir: &Path, event: &serde_json::Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = crate::files::append_private(&run_dir.join("capacity.events.jsonl"))?;
    writeln!(f, "{event}")
}
