//! `[cluster]`: run this play's agents on workers through NATS JetStream.

use std::collections::HashMap;

use super::reader::{Reader, Table};
use crate::cluster::wire::{MAX_TAGS, valid_tag};

const CLUSTER_KEYS: &[&str] = &["nats", "worker_tags"];

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterConfig {
    /// The NATS server (`nats://host:4222`, `tls://…`); credentials never
    /// come from the play.
    pub nats: String,
    /// Worker tags a role profile's operations need.
    pub worker_tags: HashMap<String, Vec<String>>,
}

/// A NATS address a run may name: the scheme is NATS', and credentials
/// are not in it (others read a play, and a command line in `ps`). The
/// error says what is allowed, and a short label for the play's caret.
pub fn check_nats_url(url: &str) -> Result<(), (String, &'static str)> {
    if !["nats://", "tls://", "ws://", "wss://"]
        .iter()
        .any(|s| url.starts_with(s))
    {
        return Err((
            "is not a NATS address; write nats://HOST:4222 (or tls://, ws://, wss://)".into(),
            "not a NATS address",
        ));
    }
    if url.contains('@') {
        return Err((
            "carries credentials; they belong in the credentials file named by PLAYDECK_NATS_CREDS (or nats.toml in the config directory), never in a play or on a command line".into(),
            "credentials",
        ));
    }
    Ok(())
}

pub(super) fn read(
    r: &mut Reader,
    root: &Table<'_, '_>,
    capacity: Option<&crate::capacity::CapacityConfig>,
) -> Option<ClusterConfig> {
    let t = root.table(r, "cluster")?;
    t.deny_unknown(r, CLUSTER_KEYS);
    let nats = match t.string(r, "nats") {
        Some((url, span)) => {
            if let Err((message, label)) = check_nats_url(&url) {
                r.error(span, format!("[cluster] nats = {url:?} {message}"), label);
            }
            url
        }
        None => {
            r.error(
                root.key_span("cluster"),
                "[cluster] needs nats = \"nats://HOST:4222\", the server its workers take jobs from",
                "no nats",
            );
            return None;
        }
    };
    let mut worker_tags = HashMap::new();
    if let Some(tags) = t.table(r, "worker_tags") {
        for (profile, span, _) in tags.entries() {
            // A profile with errors is known: its own error is the one.
            let known = capacity.is_some_and(|c| c.profiles.contains_key(profile))
                || r.broken.profiles.contains_key(profile);
            if !known {
                r.error(
                    span,
                    format!("[cluster.worker_tags] names {profile:?}, which is no role profile of this play's [capacity]"),
                    "unknown profile",
                );
                continue;
            }
            let Some(list) = tags.strings(r, profile) else {
                continue;
            };
            let mut good = Vec::new();
            for (tag, span) in list {
                if valid_tag(&tag) {
                    good.push(tag);
                } else {
                    r.error(
                        span,
                        format!(
                            "worker tag {tag:?}: letters, digits and '-', at most 32, not \"any\""
                        ),
                        "bad tag",
                    );
                }
            }
            if good.len() > MAX_TAGS {
                r.error(
                    span,
                    format!("at most {MAX_TAGS} worker tags per profile"),
                    "too many",
                );
            }
            worker_tags.insert(profile.to_string(), good);
        }
    }
    Some(ClusterConfig { nats, worker_tags })
}
