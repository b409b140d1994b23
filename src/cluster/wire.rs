//! What travels between a run (the hub) and its workers, and on which
//! subjects. Everything is JSON: a worker and a run of different builds
//! must still read each other's words, and an operator can read them with
//! `nats sub`.
//!
//! Subjects (`<nonce>` names one run's hub, `<seq>` one invocation):
//! - `pd.job.<play>.<needs>.<nonce>.<seq>`: an attempt to perform, on the
//!   work-queue stream [`JOBS_STREAM`]; `<play>` names the play and its
//!   text (see [`play_token`]: only workers serving that text pull it),
//!   `<needs>` is the
//!   worker tags it needs, sorted and joined by `_`, or `any`.
//! - `pd.out.<nonce>.<seq>`: what the worker tells of it, on the
//!   work-queue stream [`OUT_STREAM`], read by that run alone.
//! - `pd.cancel.<nonce>.<seq>`: the run no longer wants it (core NATS);
//!   `pd.cancel.<nonce>.all`: nor any attempt of that hub (a resumed run's
//!   earlier process).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::kernel::{ActivityState, AgentEvent, AgentFailure, OpId, Usage};

/// The work-queue stream of attempts.
pub const JOBS_STREAM: &str = "PD_JOBS";
/// The work-queue stream of what workers report back.
pub const OUT_STREAM: &str = "PD_OUT";
/// The key-value bucket where workers say they are alive.
pub const WORKERS_BUCKET: &str = "pd_workers";

/// The `<needs>` token of a job subject: `any`, or the tags sorted and
/// joined by `_` (tags are `[A-Za-z0-9-]`, checked where they are read).
pub fn needs_token(tags: &[String]) -> String {
    if tags.is_empty() {
        return "any".into();
    }
    let mut t: Vec<&str> = tags.iter().map(String::as_str).collect();
    t.sort_unstable();
    t.dedup();
    t.join("_")
}

/// Every `<needs>` token a worker with `tags` serves: `any` and each
/// non-empty subset of its tags.
pub fn served_tokens(tags: &[String]) -> Vec<String> {
    let mut t: Vec<String> = tags.to_vec();
    t.sort_unstable();
    t.dedup();
    let mut out = vec!["any".to_string()];
    for mask in 1u32..(1 << t.len()) {
        let subset: Vec<String> = (0..t.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| t[i].clone())
            .collect();
        out.push(needs_token(&subset));
    }
    out
}

/// Whether `tag` may be a worker tag: it becomes part of a subject and of
/// a consumer's name.
pub fn valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 32
        && tag != "any"
        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Most tags one worker may have: it pulls from a consumer per subset.
pub const MAX_TAGS: usize = 4;

pub fn job_subject(play: &str, text: &str, needs: &str, nonce: &str, seq: u64) -> String {
    format!("pd.job.{}.{needs}.{nonce}.{seq}", play_token(play, text))
}

/// The subject token of a play's name (any text: a hash of it) and of the
/// hash of its text, so a worker pulls the jobs of the plays it serves, at
/// the text it has, and no others: a worker with a stale checkout takes
/// nothing it would refuse, and leaves it to one that can run it.
pub fn play_token(name: &str, text: &str) -> String {
    format!("p{}-{text}", play_hash(name))
}

/// What a worker's consumer for `play`'s jobs (at `text`) needing `needs`
/// filters.
pub fn jobs_filter(play: &str, text: &str, needs: &str) -> String {
    format!("pd.job.{}.{needs}.>", play_token(play, text))
}

pub fn out_subject(nonce: &str, seq: u64) -> String {
    format!("pd.out.{nonce}.{seq}")
}

pub fn cancel_subject(nonce: &str, seq: u64) -> String {
    format!("pd.cancel.{nonce}.{seq}")
}

/// Every attempt of the hub `nonce` is unwanted: a run's earlier process
/// (it crashed or was killed) left them, and its resume starts them again.
pub fn cancel_all_subject(nonce: &str) -> String {
    format!("pd.cancel.{nonce}.all")
}

/// The nonce of a [`cancel_all_subject`].
pub fn cancel_all_of(subject: &str) -> Option<&str> {
    subject
        .strip_prefix("pd.cancel.")?
        .strip_suffix(".all")
        .filter(|n| is_nonce(n))
}

/// `<nonce>` and `<seq>`, the last two tokens of any of the subjects above;
/// none when the nonce is not one a run makes (a worker joins it into file
/// names: a token such as `/some/dir` must never become a path).
pub fn ids_of(subject: &str) -> Option<(&str, u64)> {
    let mut it = subject.rsplitn(3, '.');
    let seq = it.next()?.parse().ok()?;
    let nonce = it.next().filter(|n| is_nonce(n))?;
    Some((nonce, seq))
}

/// A name an operation can have, safe in a file name: not empty, at most
/// 200 bytes, no `/` or NUL, not starting with a dot.
pub fn is_op_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && !name.bytes().any(|b| b == b'/' || b == 0)
}

/// A run's nonce: 16 lowercase hex digits (see the hub); nothing else
/// from the wire is taken for one.
pub fn is_nonce(token: &str) -> bool {
    token.len() == 16
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// One attempt, as a worker needs it. The worker builds the command line
/// itself, from its own copy of the play: nothing here is run as such.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Job {
    /// The run's id, for messages.
    pub run: String,
    /// The play's name and the hash of its text: a worker runs jobs of a
    /// play it serves, at the same text, only.
    pub play: String,
    pub play_hash: String,
    pub agent: String,
    pub op_id: OpId,
    pub name: String,
    pub role: Option<String>,
    /// As the kernel decorated it (the delegation clause included).
    pub instruction: String,
    pub params: Value,
    pub context: Map<String, Value>,
    pub attempt: u32,
    pub instance: Option<String>,
    pub profile: Option<String>,
    pub usd_headroom: Option<f64>,
    /// The conversation to continue; the worker's CLI continues it when its
    /// session store has it (a retry taken by another worker starts fresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry_on: Option<crate::kernel::CarryOn>,
}

/// What a worker tells of one job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Frame {
    /// The worker has the job and is alive; it acks the job's message in
    /// progress as often. The run counts the worker lost when nothing
    /// comes for `ack_wait_ms` and a half.
    Beat {
        worker: String,
        ack_wait_ms: u64,
    },
    /// The command line it runs (for the run's `command.json`).
    Command {
        argv: Vec<String>,
    },
    Event(WireEvent),
    /// Lines of output, in order.
    Output {
        stderr: bool,
        text: String,
    },
    /// The job came again: whoever took it first went quiet past the ack
    /// deadline. The run counts that attempt lost; this worker drops it.
    Redelivered {
        worker: String,
    },
    Result {
        worker: String,
        outcome: Result<Value, WireFailure>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireFailure {
    pub category: String,
    pub message: String,
    pub wait_ms: Option<u64>,
}

impl From<&AgentFailure> for WireFailure {
    fn from(f: &AgentFailure) -> Self {
        WireFailure {
            category: f.category.to_string(),
            message: f.message.clone(),
            wait_ms: f.wait.map(|w| w.as_millis() as u64),
        }
    }
}

impl From<WireFailure> for AgentFailure {
    fn from(f: WireFailure) -> Self {
        AgentFailure::new(&f.category, f.message)
            .with_wait(f.wait_ms.map(std::time::Duration::from_millis))
    }
}

/// The agent events that mean something away from the worker (a process
/// group id does not: the run never signals a worker's processes).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "e", rename_all = "snake_case")]
pub enum WireEvent {
    Emitted {
        value: Value,
    },
    Activity {
        state: ActivityState,
        tool: Option<String>,
    },
    Usage {
        usage: Usage,
    },
    Warning {
        message: String,
    },
    ResultRestatesStream,
    Session {
        session: String,
    },
}

impl WireEvent {
    pub fn of(e: &AgentEvent) -> Option<Self> {
        Some(match e {
            AgentEvent::Emitted(v) => WireEvent::Emitted { value: v.clone() },
            AgentEvent::Activity { state, tool } => WireEvent::Activity {
                state: *state,
                tool: tool.as_deref().map(String::from),
            },
            AgentEvent::Usage(u) => WireEvent::Usage { usage: *u },
            AgentEvent::Warning(w) => WireEvent::Warning {
                message: w.to_string(),
            },
            AgentEvent::ResultRestatesStream => WireEvent::ResultRestatesStream,
            AgentEvent::Session(id) => WireEvent::Session {
                session: id.to_string(),
            },
            // Local to the process that runs the attempt (a worker's
            // questions are denied at once: the run's operator cannot be
            // asked across the bus).
            AgentEvent::Process { .. }
            | AgentEvent::Listening(_)
            | AgentEvent::Asking(_)
            | AgentEvent::AskEnded { .. }
            // Workers do not land work: isolation wraps local agents only.
            | AgentEvent::Landed(_)
            | AgentEvent::MayLand(_) => return None,
        })
    }

    pub fn into_event(self) -> AgentEvent {
        match self {
            WireEvent::Emitted { value } => AgentEvent::Emitted(value),
            WireEvent::Activity { state, tool } => AgentEvent::Activity {
                state,
                tool: tool.map(std::sync::Arc::from),
            },
            WireEvent::Usage { usage } => AgentEvent::Usage(usage),
            WireEvent::Warning { message } => AgentEvent::Warning(message.into()),
            WireEvent::ResultRestatesStream => AgentEvent::ResultRestatesStream,
            WireEvent::Session { session } => AgentEvent::Session(session.into()),
        }
    }
}

/// FNV-1a of a play's text: tells two copies apart, no more (a worker
/// trusts its own copy, never the wire).
pub fn play_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What a worker says about itself in [`WORKERS_BUCKET`], under its id.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerInfo {
    pub host: String,
    pub slots: usize,
    pub busy: usize,
    pub tags: Vec<String>,
    pub plays: Vec<String>,
    /// The hash of each play's text ([`play_hash`]), by name: a run tells
    /// a worker with another text of its play from one that serves it.
    #[serde(default)]
    pub texts: std::collections::BTreeMap<String, String>,
    /// Unix milliseconds of the last heartbeat.
    pub beat_ms: u64,
    /// Stopping: it takes no new job and ends when those it has are done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
}

/// The header that carries a message's signature: HMAC-SHA256 of its
/// subject, a NUL and its payload, in lowercase hex.
pub const SIG_HEADER: &str = "Pd-Sig";

/// Signs and checks what travels, with the key a run and its workers share
/// (`signing_key_file` in the NATS credentials file). Without a key nothing
/// is signed and everything is taken: anyone who may publish on `pd.>` can
/// then have a worker run what they write, and the run and its workers say
/// so when they start.
#[derive(Clone, Default)]
pub struct Signer(Option<ring::hmac::Key>);

/// Why a message was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unverified {
    /// It carries no signature.
    Unsigned,
    /// Its signature is not this key's over this subject and payload.
    Wrong,
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unverified::Unsigned => "it is not signed",
            Unverified::Wrong => "its signature does not verify (forged, or another key)",
        })
    }
}

/// Shortest key taken: the hash's own length.
pub const MIN_KEY_BYTES: usize = 32;

impl Signer {
    pub fn new(secret: &[u8]) -> Signer {
        Signer(Some(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)))
    }

    /// Whether messages are signed and checked.
    pub fn signs(&self) -> bool {
        self.0.is_some()
    }

    fn tag(key: &ring::hmac::Key, subject: &str, payload: &[u8]) -> ring::hmac::Tag {
        let mut ctx = ring::hmac::Context::with_key(key);
        ctx.update(subject.as_bytes());
        ctx.update(&[0]);
        ctx.update(payload);
        ctx.sign()
    }

    /// The signature to send with `payload` on `subject`, when signing.
    pub fn signature(&self, subject: &str, payload: &[u8]) -> Option<String> {
        let key = self.0.as_ref()?;
        Some(
            Self::tag(key, subject, payload)
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        )
    }

    /// Headers carrying [`Signer::signature`], when signing.
    pub fn headers(&self, subject: &str, payload: &[u8]) -> Option<async_nats::HeaderMap> {
        let sig = self.signature(subject, payload)?;
        let mut h = async_nats::HeaderMap::new();
        h.insert(SIG_HEADER, sig.as_str());
        Some(h)
    }

    /// Whether a message is this key's; anything is, without a key.
    pub fn verify(
        &self,
        subject: &str,
        headers: Option<&async_nats::HeaderMap>,
        payload: &[u8],
    ) -> Result<(), Unverified> {
        let Some(key) = &self.0 else { return Ok(()) };
        let sig = headers
            .and_then(|h| h.get(SIG_HEADER))
            .map(|v| v.as_str())
            .ok_or(Unverified::Unsigned)?;
        let bytes = unhex(sig).ok_or(Unverified::Wrong)?;
        let mut ctx = Vec::with_capacity(subject.len() + 1 + payload.len());
        ctx.extend_from_slice(subject.as_bytes());
        ctx.push(0);
        ctx.extend_from_slice(payload);
        ring::hmac::verify(key, &ctx, &bytes).map_err(|_| Unverified::Wrong)
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_covers_the_subject_and_the_payload() {
        let key = Signer::new(&[7u8; 32]);
        let h = key.headers("pd.job.p1.any.00ff.1", b"{}").unwrap();
        assert_eq!(key.verify("pd.job.p1.any.00ff.1", Some(&h), b"{}"), Ok(()));
        // Another payload, another subject (the same job sent to another
        // run's seq), no signature, another key: refused.
        let wrong = Err(Unverified::Wrong);
        assert_eq!(key.verify("pd.job.p1.any.00ff.1", Some(&h), b"{ }"), wrong);
        assert_eq!(key.verify("pd.job.p1.any.00ff.2", Some(&h), b"{}"), wrong);
        assert_eq!(
            key.verify("pd.job.p1.any.00ff.1", None, b"{}"),
            Err(Unverified::Unsigned)
        );
        let other = Signer::new(&[8u8; 32]);
        assert_eq!(other.verify("pd.job.p1.any.00ff.1", Some(&h), b"{}"), wrong);
        let mut junk = async_nats::HeaderMap::new();
        junk.insert(SIG_HEADER, "zz");
        assert_eq!(key.verify("s", Some(&junk), b""), wrong);
        // Without a key, nothing is signed and anything is taken.
        let none = Signer::default();
        assert!(none.headers("s", b"").is_none());
        assert_eq!(none.verify("s", None, b""), Ok(()));
    }

    #[test]
    fn a_worker_serves_every_subset_of_its_tags_and_any() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(served_tokens(&[]), ["any"]);
        assert_eq!(
            served_tokens(&t(&["linux", "gpu"])),
            ["any", "gpu", "linux", "gpu_linux"]
        );
        assert_eq!(needs_token(&t(&["linux", "gpu", "gpu"])), "gpu_linux");
        assert!(served_tokens(&t(&["gpu", "linux"])).contains(&needs_token(&t(&["linux", "gpu"]))));
    }

    #[test]
    fn tags_are_subject_tokens() {
        assert!(valid_tag("gpu-a100"));
        for bad in ["", "any", "g.pu", "g*", "g>", "g pu", "g_pu"] {
            assert!(!valid_tag(bad), "{bad:?}");
        }
    }

    #[test]
    fn ids_come_back_from_every_subject() {
        let n = "00ab12cd34ef5678";
        let text = play_hash("[play]\nname = \"my play. with dots\"\n");
        let job = job_subject("my play. with dots", &text, "gpu", n, 7);
        assert_eq!(ids_of(&job), Some((n, 7)));
        // Any play name makes one subject token, and the filter takes it.
        assert_eq!(job.split('.').count(), 6, "{job}");
        let filter = jobs_filter("my play. with dots", &text, "gpu");
        assert!(
            job.starts_with(filter.trim_end_matches('>')),
            "{job} {filter}"
        );
        // Another text of the play: another filter, which does not take it.
        let stale = jobs_filter("my play. with dots", &play_hash("other"), "gpu");
        assert!(!job.starts_with(stale.trim_end_matches('>')), "{stale}");
        assert_eq!(ids_of(&out_subject(n, 8)), Some((n, 8)));
        assert_eq!(ids_of(&cancel_subject(n, 9)), Some((n, 9)));
        assert_eq!(ids_of("pd.out.x"), None);
        assert_eq!(cancel_all_of(&cancel_all_subject(n)), Some(n));
        assert_eq!(cancel_all_of(&cancel_subject(n, 9)), None);
    }

    /// Issue 39: a subject's nonce token was joined into the worker's log
    /// path, and then removed with everything under it: `/some/dir`,
    /// `..`, or anything but a run's nonce is no nonce.
    #[test]
    fn a_nonce_from_the_wire_is_never_a_path() {
        for bad in [
            "/some/dir",
            "..",
            "../../x",
            "ab12",
            "00AB12CD34EF5678",
            "00ab12cd34ef567/",
            "",
        ] {
            let subject = format!("pd.job.p1.any.{bad}.7");
            assert_eq!(ids_of(&subject), None, "{bad:?}");
            assert_eq!(
                cancel_all_of(&format!("pd.cancel.{bad}.all")),
                None,
                "{bad:?}"
            );
        }
        for bad in ["", "../x", "a/b", ".hidden", "a\0b"] {
            assert!(!is_op_name(bad), "{bad:?}");
        }
        assert!(is_op_name("spawn-12") && is_op_name("svc12-integration"));
    }

    #[test]
    fn frames_read_back_as_written() {
        let frames = [
            Frame::Beat {
                worker: "w1".into(),
                ack_wait_ms: 2000,
            },
            Frame::Event(WireEvent::Activity {
                state: ActivityState::Tool,
                tool: Some("bash".into()),
            }),
            Frame::Result {
                worker: "w1".into(),
                outcome: Err(WireFailure {
                    category: "rate_limit".into(),
                    message: "slow down".into(),
                    wait_ms: Some(1500),
                }),
            },
        ];
        for f in frames {
            let text = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Frame>(&text).unwrap(), f, "{text}");
        }
        assert_eq!(play_hash("a"), play_hash("a"));
        assert_ne!(play_hash("a"), play_hash("b"));
    }
}
