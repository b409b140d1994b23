//! The reconciler's writer thread: capacity.json and
//! capacity.events.jsonl, and removing worktrees — file and `git` work
//! that never happens under the state lock.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::mpsc;

use serde_json::{Value, json};

use crate::capacity::state::{CapacityFile, now};
use crate::capacity::workspace;

pub(super) enum Persist {
    Write {
        file: Box<CapacityFile>,
        events: Vec<Value>,
    },
    Cleanup {
        repo: PathBuf,
        path: PathBuf,
        branch: String,
    },
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The writer thread: appends events, rewrites the state file atomically
/// (coalescing bursts to the latest state), removes worktrees.
pub(super) fn writer_loop(rx: mpsc::Receiver<Persist>, file_path: PathBuf, events_path: PathBuf) {
    let mut events = match crate::files::append_private(&events_path) {
        Ok(f) => Some(std::io::BufWriter::new(f)),
        Err(e) => {
            tracing::error!(path = %events_path.display(), "cannot open capacity events: {e}");
            None
        }
    };
    let write_file = |file: &CapacityFile| {
        let mut bytes = serde_json::to_vec_pretty(file).expect("serialisable");
        bytes.push(b'\n');
        if let Err(e) = crate::files::write_atomic(&file_path, &bytes) {
            tracing::error!(path = %file_path.display(), "cannot write capacity state: {e}");
        }
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut latest: Option<Box<CapacityFile>> = None;
        for msg in batch {
            match msg {
                Persist::Write { file, events: evs } => {
                    if let Some(out) = &mut events {
                        for e in evs {
                            let _ = serde_json::to_writer(&mut *out, &e);
                            let _ = out.write_all(b"\n");
                        }
                    }
                    latest = Some(file);
                }
                Persist::Cleanup { repo, path, branch } => {
                    let event = match workspace::remove_worktree(&repo, &path, Some(&branch)) {
                        Ok(removed) => {
                            json!({"at": now(), "event": "worktree_removed", "path": path, "branch": branch, "branch_kept": removed.branch_kept})
                        }
                        Err(e) => {
                            tracing::warn!(path = %path.display(), "{e}");
                            json!({"at": now(), "event": "worktree_kept", "path": path, "detail": e.to_string()})
                        }
                    };
                    if let Some(out) = &mut events {
                        let _ = serde_json::to_writer(&mut *out, &event);
                        let _ = out.write_all(b"\n");
                    }
                }
                Persist::Flush(done) => {
                    if let Some(f) = latest.take() {
                        write_file(&f);
                    }
                    if let Some(out) = &mut events {
                        let _ = out.flush();
                    }
                    let _ = done.send(());
                }
            }
        }
        if let Some(f) = latest {
            write_file(&f);
        }
        if let Some(out) = &mut events {
            let _ = out.flush();
        }
    }
}
