//! `playdeck worker`: a process that performs `[cluster]` runs' agents.

use std::time::Duration;

use playdeck::cluster::{self, wire};
use playdeck::worker::WorkerOptions;

use super::{CmdError, Outcome, block_on, stop_requests};
use crate::cli::WorkerArgs;

pub fn worker(args: WorkerArgs) -> Outcome {
    for t in &args.tags {
        if !wire::valid_tag(t) {
            return Err(CmdError::Input(format!(
                "worker: --tag {t:?}: a tag is letters, digits and '-', at most 32, not \"any\""
            )));
        }
    }
    if args.tags.len() > wire::MAX_TAGS {
        return Err(CmdError::Input(format!(
            "worker: {} tags given; at most {}",
            args.tags.len(),
            wire::MAX_TAGS
        )));
    }
    // The address is not echoed: it may carry a secret.
    if let Err((message, _)) = playdeck::play::cluster_section::check_nats_url(&args.nats) {
        return Err(CmdError::Input(format!("worker: --nats {message}")));
    }
    if !args.dir.is_dir() {
        return Err(CmdError::Input(format!(
            "worker: --dir {}: no such directory",
            args.dir.display()
        )));
    }
    log_to_stderr();
    let plays: Vec<_> = args.plays.iter().map(|p| args.dir.join(p)).collect();
    for p in &plays {
        // Every play is checked before anything connects.
        playdeck::play::Play::load(p)?;
    }
    let opts = WorkerOptions {
        slots: usize::from(args.slots),
        tags: args.tags.clone(),
        plays,
        ack_wait: Duration::from_secs(args.ack_wait.max(1)),
        state_dir: args.dir.join(".playdeck/worker"),
    };
    let url = args.nats.clone();
    block_on(true, async move {
        let mut stop = stop_requests();
        let name = format!("playdeck worker {}", std::process::id());
        let conn = tokio::time::timeout(cluster::FIRST_CONNECT, cluster::connect(&url, &name))
            .await
            .map_err(|_| {
                CmdError::Failed(format!(
                    "worker: no NATS server answered at {url} in {} s",
                    cluster::FIRST_CONNECT.as_secs()
                ))
            })?
            .map_err(|e| CmdError::Failed(format!("worker: {url}: {e}")))?;
        // The first signal drains, a second stops at once.
        let (drain, now) = (
            tokio::sync::oneshot::channel(),
            tokio::sync::oneshot::channel(),
        );
        let (first, second) = (drain.0, now.0);
        tokio::spawn(async move {
            let _ = stop.recv().await;
            let _ = first.send(());
            let _ = stop.recv().await;
            let _ = second.send(());
        });
        playdeck::worker::serve(
            conn,
            opts,
            async move {
                let _ = drain.1.await;
            },
            async move {
                let _ = now.1.await;
            },
        )
        .await
        .map_err(|e| CmdError::Failed(format!("worker: {e}")))?;
        Ok(0)
    })?
}

/// A worker (and `playdeck web`) is a service: what it does and refuses goes to stderr, where
/// its supervisor (systemd, Kubernetes) keeps it; `PLAYDECK_LOG` filters
/// (`info` unless it says otherwise).
pub(super) fn log_to_stderr() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("PLAYDECK_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
