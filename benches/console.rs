//! Console benchmark: `cargo bench --bench console` prints one JSON line per
//! case.
//!
//! - `frame`: drawing a 200×60 screen with 1 000, 10 000 and 100 000
//!   operations in the view model (mean and worst of 200 frames).
//! - `fold`: folding 100 000 signals into a fresh view model.
//! - `key_to_frame`: the real event loop (the one the terminal drives) fed
//!   100 000 signals a second while a key is pressed every 100 ms; the time
//!   from each key press to the first drawn frame that shows it.
//! - `seek`: a replay of a 100 000-event log: building the timeline, then
//!   200 seeks to scattered events (back and forth), each to a ready view.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use playdeck::console::app::App;
use playdeck::console::keymap::Keymap;
use playdeck::console::{run, theme, ui};
use playdeck::kernel::{DropReason, NodeHeader, Outcome, Signal, SignalKind, Subscription};
use playdeck::operator::model::PlayFacts;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

struct Gen {
    seq: u64,
    elapsed: f64,
}

impl Gen {
    fn sig(&mut self, kind: SignalKind) -> Signal {
        self.seq += 1;
        self.elapsed += 0.0001;
        Signal {
            v: 1,
            seq: self.seq,
            elapsed: self.elapsed,
            kind,
        }
    }

    fn header(i: u64) -> NodeHeader {
        NodeHeader {
            op_id: uuid::Uuid::from_u128(u128::from(i) + 1),
            name: Arc::from(format!("op-{i}")),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
            pos: playdeck::kernel::log_line::NO_POS,
        }
    }

    /// Signals for operation `i`: queued, then (mostly) started, then
    /// (mostly) settled, with a ledger entry now and then.
    fn op(&mut self, i: u64, out: &mut Vec<Signal>) {
        let role = Some(Arc::from(if i.is_multiple_of(3) {
            "tester"
        } else {
            "implementer"
        }));
        out.push(self.sig(SignalKind::Queued {
            node: Self::header(i),
            role: role.clone(),
            instruction: Arc::from("work"),
            approval: false,
        }));
        if i % 10 < 8 {
            out.push(self.sig(SignalKind::Started {
                node: Self::header(i),
                attempt: 1,
                role,
                instance: None,
            }));
            if i % 10 < 6 {
                out.push(self.sig(SignalKind::Completed {
                    node: Self::header(i),
                    result: Arc::new(Value::Null),
                }));
            } else if i % 10 == 6 {
                out.push(self.sig(SignalKind::Failed {
                    node: Self::header(i),
                    error: Arc::from("boom"),
                    category: Arc::from("simulated"),
                }));
            }
        }
        if i.is_multiple_of(50) {
            out.push(self.sig(SignalKind::SpawnDropped {
                reason: DropReason::MaxSpawnExceeded,
                assignee: Some(Arc::from("tester")),
                emitter_id: Some(uuid::Uuid::from_u128(1)),
                detail: Arc::from("cap"),
                op_id: None,
                identity: None,
                request: None,
            }));
        }
    }

    fn run_started(&mut self) -> Signal {
        self.sig(SignalKind::RunStarted {
            run_id: Arc::from("bench"),
            play: Arc::from("bench"),
            operations: 0,
            max_concurrent: 10_000,
            reactive: true,
            max_spawn: 50,
            paused: false,
            budget: None,
        })
    }
}

fn app() -> App {
    let themes = theme::load_all(None).unwrap();
    App::new(
        &PlayFacts::default(),
        themes,
        0,
        Keymap::defaults(),
        false,
        Default::default(),
    )
}

fn ops(n: u64) -> Vec<Signal> {
    let mut g = Gen {
        seq: 0,
        elapsed: 0.0,
    };
    let mut v = vec![g.run_started()];
    for i in 0..n {
        g.op(i, &mut v);
    }
    v
}

fn frame_case(n: u64) -> Value {
    let mut a = app();
    for s in ops(n) {
        a.fold(&s);
    }
    a.after_fold();
    let area = ratatui::layout::Rect::new(0, 0, 200, 60);
    playdeck::console::ui::arrange(&mut a, area);
    let Ok(mut term) = Terminal::new(TestBackend::new(200, 60));
    let mut times = Vec::new();
    for i in 0..200 {
        // Move the selection so frames differ, as when an operator scrolls;
        // the layout pass is part of every frame.
        a.lanes[0].select(i * 97 % a.lane_len(0).max(1));
        let t = Instant::now();
        playdeck::console::ui::arrange(&mut a, area);
        let Ok(_) = term.draw(|f| ui::draw(f, &a));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let worst = times.iter().cloned().fold(0.0, f64::max);
    json!({"case": "frame", "size": "200x60", "operations": n, "mean_ms": round(mean), "worst_ms": round(worst)})
}

fn fold_case() -> Value {
    let n_signals = 100_000;
    let v = signals(n_signals);
    let mut a = app();
    let t = Instant::now();
    for s in &v {
        a.fold(s);
    }
    a.after_fold();
    let secs = t.elapsed().as_secs_f64();
    json!({"case": "fold", "signals": n_signals, "wall_s": round(secs), "signals_per_s": (n_signals as f64 / secs).round()})
}

fn latency_case() -> Value {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, rx) = broadcast::channel::<Arc<Signal>>(1 << 16);
        let mut sub = Subscription::from_broadcast(rx);
        let seconds = 5.0;
        // The producer: 100 signals every millisecond.
        let producer = tokio::spawn(async move {
            let mut g = Gen {
                seq: 0,
                elapsed: 0.0,
            };
            let _ = tx.send(Arc::new(g.run_started()));
            let start = Instant::now();
            let mut sent = 0u64;
            let mut i = 0;
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            while start.elapsed().as_secs_f64() < seconds {
                tick.tick().await;
                let due = (start.elapsed().as_secs_f64() * 100_000.0) as u64;
                let mut batch = Vec::new();
                while sent + (batch.len() as u64) < due {
                    g.op(i, &mut batch);
                    i += 1;
                }
                for s in batch {
                    let _ = tx.send(Arc::new(s));
                    sent += 1;
                }
            }
            let _ = tx.send(Arc::new(g.sig(SignalKind::RunFinished {
                outcome: Outcome::Succeeded,
                counts: Default::default(),
                spent: None,
            })));
            sent
        });
        // Keys: `t` (next theme) every 100 ms; the frame that shows the new
        // theme is the one that answered the key.
        let (ev_tx, ev_rx) = mpsc::unbounded_channel::<std::io::Result<Event>>();
        let pressed: Arc<Mutex<Option<(Instant, usize)>>> = Arc::default();
        let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
        let p = pressed.clone();
        let keys = tokio::spawn(async move {
            let mut presses = 0usize;
            tokio::time::sleep(Duration::from_millis(300)).await;
            while presses < 45 {
                presses += 1;
                *p.lock().unwrap() = Some((Instant::now(), presses));
                let _ = ev_tx.send(Ok(Event::Key(KeyEvent::new(
                    KeyCode::Char('t'),
                    KeyModifiers::NONE,
                ))));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Quit once the producer is done.
            tokio::time::sleep(Duration::from_millis(600)).await;
            let _ = ev_tx.send(Ok(Event::Key(KeyEvent::new(
                KeyCode::Char('q'),
                KeyModifiers::NONE,
            ))));
        });
        let mut events = tokio_stream(ev_rx);
        let mut a = app();
        let themes = a.themes.len();
        let Ok(mut term) = Terminal::new(TestBackend::new(200, 60));
        let lat = latencies.clone();
        let pr = pressed.clone();
        let mut frames = 0usize;
        let (_stop_tx, mut stop) = mpsc::unbounded_channel();
        let mut source = run::Source::Live {
            sub: &mut sub,
            session: None,
        };
        run::event_loop(
            &mut a,
            &mut source,
            &mut events,
            |app: &mut App| {
                playdeck::console::ui::arrange(app, ratatui::layout::Rect::new(0, 0, 200, 60));
                let Ok(_) = term.draw(|f| ui::draw(f, app));
                frames += 1;
                let mut p = pr.lock().unwrap();
                if let Some((at, n)) = *p
                    && app.theme == n % themes
                {
                    lat.lock().unwrap().push(at.elapsed().as_secs_f64() * 1e3);
                    *p = None;
                }
                Ok(())
            },
            &mut stop,
        )
        .await
        .unwrap();
        let sent = producer.await.unwrap();
        keys.await.unwrap();
        let mut l = latencies.lock().unwrap().clone();
        l.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let pct = |q: f64| l[((l.len() as f64 - 1.0) * q).round() as usize];
        json!({
            "case": "key_to_frame",
            "signals_per_s": (sent as f64 / seconds).round(),
            "operations": a.vm.nodes.len(),
            "keys": l.len(),
            "frames": frames,
            "p50_ms": round(pct(0.5)),
            "p99_ms": round(pct(0.99)),
            "max_ms": round(*l.last().unwrap()),
        })
    })
}

/// An unbounded receiver as a stream of terminal events.
fn tokio_stream(
    mut rx: mpsc::UnboundedReceiver<std::io::Result<Event>>,
) -> impl futures_util::Stream<Item = std::io::Result<Event>> + Unpin {
    Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn signals(n_signals: usize) -> Vec<Signal> {
    let mut g = Gen {
        seq: 0,
        elapsed: 0.0,
    };
    let mut v = vec![g.run_started()];
    let mut i = 0;
    while v.len() < n_signals {
        g.op(i, &mut v);
        i += 1;
    }
    v.truncate(n_signals);
    v
}

fn seek_case() -> Value {
    use playdeck::console::app::ReplayCmd;
    use playdeck::console::replay::{Player, Timeline};
    let n = 100_000;
    let v = signals(n);
    let t = Instant::now();
    let timeline = Timeline::new(v, PlayFacts::default());
    let build = t.elapsed().as_secs_f64();
    let mut a = app();
    let mut player = Player::new(timeline);
    let mut times = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..200 {
        // A fixed pseudo-random walk over the whole log.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pos = (x % n as u64) as usize;
        let t = Instant::now();
        player.apply(&mut a, ReplayCmd::JumpTo(format!("#{pos}")));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    json!({"case": "seek", "events": n, "timeline_build_s": round(build), "seeks": times.len(), "p50_ms": round(p(0.5)), "p99_ms": round(p(0.99)), "max_ms": round(*times.last().unwrap())})
}

fn main() {
    let only_seek = std::env::args().any(|a| a == "seek");
    if only_seek {
        println!("{}", seek_case());
        return;
    }
    for n in [1_000, 10_000, 100_000] {
        println!("{}", frame_case(n));
    }
    println!("{}", fold_case());
    println!("{}", seek_case());
    println!("{}", latency_case());
}
