//! What one attempt's stream may add to the run's durable record. Every
//! activity, usage and warning update would otherwise become an event: an
//! agent printing `usage` lines in a loop wrote ~140 000 events a second.
//! Here they are coalesced per attempt — only the latest usage total and
//! activity matter, so each goes out at most once per interval with the
//! newest value; a warning repeated word for word is one row with a count —
//! and an attempt that still writes too much, or reads absurdly many
//! updates, is stopped as `output_flood`. Requests (`Emit`) pass at once:
//! they have their own cap (`max_requests`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::stream::Update;
use crate::kernel::{ActivityState, AgentEvent, AgentEvents, Usage};

/// The newest usage total goes out at most this often.
pub const USAGE_EVERY: Duration = Duration::from_secs(1);
/// Activity changes go out as they come up to this many in a burst (a
/// real agent's tool calls are each seen), then at this rate with the
/// newest state (a loop is not).
pub const ACTIVITY_BURST: f64 = 64.0;
pub const ACTIVITY_PER_SEC: f64 = 4.0;
/// A warning waits this long for its repeats before it goes out once,
/// with their count.
pub const WARNING_EVERY: Duration = Duration::from_secs(1);
/// Events one attempt may add to the run's record.
pub const MAX_ROWS: usize = 5_000;
/// Bytes of warning text one attempt may add to the run's record.
pub const MAX_BYTES: usize = 1 << 20;
/// Activity, usage and warning updates one attempt may send at all, before
/// coalescing: no real agent comes near (they change state a few times per
/// tool call); a stream past it is a loop.
pub const MAX_UPDATES: usize = 1_000_000;

/// Where an attempt's events go, and the operation's name for its
/// warnings.
pub struct Sink<'a> {
    pub events: &'a AgentEvents,
    pub name: &'a str,
    /// The `[prices]` of the attempt's model: its usage is priced with it
    /// when the CLI reports no cost.
    pub price: Option<&'a super::prices::Price>,
}

/// The events one attempt has added to the run's record, counted by its
/// stream and by its permission questions alike: a loop of questions is
/// as much a flood as a loop of output.
#[derive(Clone, Default)]
pub struct Rows(Arc<RowsInner>);

#[derive(Default)]
struct RowsInner {
    n: std::sync::atomic::AtomicUsize,
    over: tokio::sync::Notify,
}

impl Rows {
    /// Counts `k` more rows: `false` once the attempt is past [`MAX_ROWS`]
    /// (and its supervisor, waiting in [`Rows::over`], is told).
    pub fn add(&self, k: usize) -> bool {
        use std::sync::atomic::Ordering;
        let n = self.0.n.fetch_add(k, Ordering::Relaxed) + k;
        if n > MAX_ROWS {
            self.0.over.notify_one();
            return false;
        }
        true
    }

    /// Returns once a count went past the bound.
    pub async fn over(&self) {
        self.0.over.notified().await;
    }

    /// Why an attempt past the bound is stopped.
    pub fn flood() -> Flood {
        Flood(format!(
            "it would add more than {MAX_ROWS} events to the run's record"
        ))
    }
}

/// Why an attempt was stopped for its output.
#[derive(Debug, Clone, PartialEq)]
pub struct Flood(pub String);

#[derive(Default)]
pub struct Outflow {
    usage: Option<Usage>,
    usage_sent: Option<Instant>,
    activity: Option<(ActivityState, Option<Arc<str>>)>,
    /// Activity rows that may go out now, and when that was counted.
    activity_tokens: Option<(f64, Instant)>,
    /// The warning waiting for its repeats: text, count, first seen.
    warning: Option<(String, u64, Instant)>,
    rows: Rows,
    bytes: usize,
    updates: usize,
    flood: Option<Flood>,
}

impl Outflow {
    /// An outflow whose events count in `rows`, with the attempt's
    /// questions.
    pub fn counting(rows: Rows) -> Outflow {
        Outflow {
            rows,
            ..Outflow::default()
        }
    }

    /// Takes what the parser read; sends what is due now.
    pub fn take(&mut self, inv: &Sink, updates: &mut Vec<Update>, now: Instant) {
        for u in updates.drain(..) {
            match u {
                Update::Emit(v) => inv.events.emit(AgentEvent::Emitted(v)),
                Update::Activity(state, tool) => {
                    self.counted();
                    // Each change is its own row while the burst lasts.
                    if self.activity.is_some() && self.tokens(now) >= 1.0 {
                        self.send_activity(inv, now);
                    }
                    self.activity = Some((state, tool));
                }
                Update::Usage(u) => {
                    self.counted();
                    self.usage = Some(u);
                }
                // Once an attempt: it cannot flood.
                Update::Session(id) => inv.events.emit(AgentEvent::Session(id)),
                // The runner's own business (supervise takes it first).
                Update::TurnEnd | Update::Took => {}
                Update::Warning(w) => {
                    self.counted();
                    match &mut self.warning {
                        Some((text, n, _)) if *text == w => *n += 1,
                        _ => {
                            self.send_warning(inv);
                            self.warning = Some((w, 1, now));
                        }
                    }
                }
            }
        }
        self.send_due(inv, now);
    }

    fn counted(&mut self) {
        self.updates += 1;
        if self.updates > MAX_UPDATES && self.flood.is_none() {
            self.flood = Some(Flood(format!(
                "its stream sent more than {MAX_UPDATES} activity, usage and warning updates"
            )));
        }
    }

    /// Activity rows that may go out at `now`.
    fn tokens(&mut self, now: Instant) -> f64 {
        let (t, at) = self.activity_tokens.get_or_insert((ACTIVITY_BURST, now));
        *t = (*t + now.saturating_duration_since(*at).as_secs_f64() * ACTIVITY_PER_SEC)
            .min(ACTIVITY_BURST);
        *at = now;
        *t
    }

    /// When something held back is due (for the supervisor's timer).
    pub fn next_due(&self) -> Option<Instant> {
        let after = |sent: Option<Instant>, every| sent.map(|t| t + every);
        let activity = self.activity.as_ref().map(|_| match self.activity_tokens {
            Some((t, at)) if t < 1.0 => at + Duration::from_secs_f64((1.0 - t) / ACTIVITY_PER_SEC),
            Some((_, at)) => at,
            None => Instant::now(),
        });
        [
            activity,
            self.usage.as_ref().and(after(self.usage_sent, USAGE_EVERY)),
            self.warning.as_ref().map(|(_, _, at)| *at + WARNING_EVERY),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Sends what is due at `now`.
    pub fn send_due(&mut self, inv: &Sink, now: Instant) {
        let due = |sent: Option<Instant>, every| sent.is_none_or(|t| now >= t + every);
        if self.activity.is_some() && self.tokens(now) >= 1.0 {
            self.send_activity(inv, now);
        }
        if self.usage.is_some() && due(self.usage_sent, USAGE_EVERY) {
            self.send_usage(inv, now);
        }
        if self
            .warning
            .as_ref()
            .is_some_and(|(_, _, at)| now >= *at + WARNING_EVERY)
        {
            self.send_warning(inv);
        }
    }

    /// Sends everything held back (the attempt's stream has ended).
    pub fn finish(&mut self, inv: &Sink) {
        let now = Instant::now();
        self.send_activity(inv, now);
        self.send_usage(inv, now);
        self.send_warning(inv);
    }

    /// Why the attempt must stop, once it must.
    pub fn flood(&self) -> Option<&Flood> {
        self.flood.as_ref()
    }

    fn send_activity(&mut self, inv: &Sink, now: Instant) {
        if let Some((state, tool)) = self.activity.take() {
            let (t, _) = self.activity_tokens.get_or_insert((ACTIVITY_BURST, now));
            *t -= 1.0;
            self.row(inv, 0, AgentEvent::Activity { state, tool });
        }
    }

    fn send_usage(&mut self, inv: &Sink, now: Instant) {
        if let Some(u) = self.usage.take() {
            self.usage_sent = Some(now);
            let u = super::prices::priced(u, inv.price);
            self.row(inv, 0, AgentEvent::Usage(u));
        }
    }

    fn send_warning(&mut self, inv: &Sink) {
        if let Some((w, n, _)) = self.warning.take() {
            let text = if n > 1 {
                format!("{}: {w} (×{n})", inv.name)
            } else {
                format!("{}: {w}", inv.name)
            };
            self.row(inv, text.len(), AgentEvent::Warning(Arc::from(text)));
        }
    }

    fn row(&mut self, inv: &Sink, bytes: usize, event: AgentEvent) {
        if self.flood.is_some() {
            return;
        }
        self.bytes += bytes;
        if !self.rows.add(1) {
            self.flood = Some(Rows::flood());
        } else if self.bytes > MAX_BYTES {
            self.flood = Some(Flood(format!(
                "its warnings would add more than {} MiB to the run's record",
                MAX_BYTES >> 20
            )));
        } else {
            inv.events.emit(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::agent::AgentMsg;
    use tokio::sync::mpsc::UnboundedReceiver;

    fn events() -> (AgentEvents, UnboundedReceiver<AgentMsg>) {
        AgentEvents::for_test()
    }

    fn sink(events: &AgentEvents) -> Sink<'_> {
        Sink {
            events,
            name: "work",
            price: None,
        }
    }

    fn drain(rx: &mut UnboundedReceiver<AgentMsg>) -> Vec<AgentEvent> {
        let mut v = Vec::new();
        while let Ok(m) = rx.try_recv() {
            v.push(m.event);
        }
        v
    }

    fn usage(n: u64) -> Update {
        Update::Usage(Usage {
            output_tokens: Some(n),
            ..Usage::default()
        })
    }

    #[test]
    fn usage_goes_out_once_per_interval_with_the_newest_total() {
        let (events, mut rx) = events();
        let inv = sink(&events);
        let mut o = Outflow::default();
        let t0 = Instant::now();
        let mut ups: Vec<Update> = (1..=10).map(usage).collect();
        o.take(&inv, &mut ups, t0);
        // The newest at once, the first time.
        match drain(&mut rx).as_slice() {
            [AgentEvent::Usage(u)] => assert_eq!(u.output_tokens, Some(10)),
            other => panic!("{other:?}"),
        }
        // More soon after waits for the interval, and goes out as one.
        let mut ups: Vec<Update> = (11..=1000).map(usage).collect();
        o.take(&inv, &mut ups, t0 + Duration::from_millis(10));
        assert!(drain(&mut rx).is_empty());
        assert_eq!(o.next_due(), Some(t0 + USAGE_EVERY));
        o.send_due(&inv, t0 + USAGE_EVERY);
        match drain(&mut rx).as_slice() {
            [AgentEvent::Usage(u)] => assert_eq!(u.output_tokens, Some(1000), "the newest"),
            other => panic!("{other:?}"),
        }
        assert_eq!(o.next_due(), None);
    }

    #[test]
    fn a_repeated_warning_is_one_row_with_a_count() {
        let (events, mut rx) = events();
        let inv = sink(&events);
        let mut o = Outflow::default();
        let t0 = Instant::now();
        let mut ups: Vec<Update> = (0..500)
            .map(|_| Update::Warning("disk slow".into()))
            .collect();
        ups.push(Update::Warning("other".into()));
        o.take(&inv, &mut ups, t0);
        match drain(&mut rx).as_slice() {
            [AgentEvent::Warning(w)] => assert_eq!(&**w, "work: disk slow (×500)"),
            other => panic!("{other:?}"),
        }
        o.finish(&inv);
        match drain(&mut rx).as_slice() {
            [AgentEvent::Warning(w)] => assert_eq!(&**w, "work: other"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn distinct_warnings_past_the_cap_are_a_flood() {
        let (events, mut rx) = events();
        let inv = sink(&events);
        let mut o = Outflow::default();
        let mut ups: Vec<Update> = (0..=MAX_ROWS + 1)
            .map(|i| Update::Warning(format!("warning {i}")))
            .collect();
        o.take(&inv, &mut ups, Instant::now());
        assert_eq!(drain(&mut rx).len(), MAX_ROWS);
        assert!(o.flood().is_some());
    }

    #[test]
    fn activity_changes_each_go_out_in_a_burst_and_a_loop_is_folded() {
        let (events, mut rx) = events();
        let inv = sink(&events);
        let mut o = Outflow::default();
        let t0 = Instant::now();
        let states = [
            ActivityState::Thinking,
            ActivityState::Tool,
            ActivityState::Writing,
        ];
        let mut ups: Vec<Update> = states.iter().map(|s| Update::Activity(*s, None)).collect();
        o.take(&inv, &mut ups, t0);
        assert_eq!(drain(&mut rx).len(), 3, "every change of a real agent");
        let mut ups: Vec<Update> = (0..10_000)
            .map(|i| Update::Activity(states[i % 2], None))
            .collect();
        o.take(&inv, &mut ups, t0);
        let sent = drain(&mut rx).len();
        assert_eq!(sent, ACTIVITY_BURST as usize - 3, "the burst, then held");
        let due = o.next_due().unwrap();
        assert!(
            due > t0 && due <= t0 + Duration::from_millis(250),
            "{due:?}"
        );
        o.send_due(&inv, due);
        assert_eq!(drain(&mut rx).len(), 1, "the newest, when a token is back");
    }
}
