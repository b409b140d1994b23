//! Snapshots of every pane and of whole screens (120×36 and 80×24) on
//! ratatui's TestBackend, the demo played to a moment under tokio's paused
//! clock. Op ids are redacted: they depend on test order.

use crate::common;

use common::screen_text as text;
use playdeck::console::screenshot::Scene;
use playdeck::console::ui;
use playdeck::play::Play;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

fn draw(w: u16, h: u16, f: impl FnOnce(&mut ratatui::Frame)) -> String {
    let Ok(mut term) = Terminal::new(TestBackend::new(w, h));
    let Ok(_) = term.draw(f);
    text(term.backend().buffer())
}

async fn scene(at: f64, w: u16, h: u16) -> Scene {
    Scene::at(&Play::demo(), at, w, h, None).await.unwrap()
}

fn keys(k: &str) -> Vec<String> {
    k.split_whitespace().map(str::to_string).collect()
}

#[tokio::test(start_paused = true)]
async fn whole_screen_120x36_mid_run() {
    let mut s = scene(12.0, 120, 36).await;
    insta::assert_snapshot!(text(&s.render()));
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn whole_screen_80x24_mid_run() {
    let mut s = scene(22.0, 80, 24).await;
    insta::assert_snapshot!(text(&s.render()));
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn too_small_says_so() {
    let mut s = scene(1.0, 70, 20).await;
    let t = text(&s.render());
    assert!(t.contains("The terminal is too small for playdeck."), "{t}");
    assert!(
        t.contains("It is 70×20; playdeck needs at least 80×24"),
        "{t}"
    );
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn each_pane_alone() {
    let s = scene(30.0, 120, 36).await;
    let app = &s.app;
    insta::assert_snapshot!(
        "header",
        draw(120, 2, |f| ui::draw_header(f, f.area(), app))
    );
    insta::assert_snapshot!(
        "footer",
        draw(120, 2, |f| ui::draw_footer(f, f.area(), app))
    );
    insta::assert_snapshot!(
        "budgets",
        draw(40, 12, |f| ui::draw_budgets(f, f.area(), app))
    );
    insta::assert_snapshot!(
        "ledger",
        draw(70, 14, |f| ui::draw_ledger(f, f.area(), app))
    );
    insta::assert_snapshot!(
        "capacity",
        draw(44, 12, |f| ui::draw_capacity(f, f.area(), app))
    );
    let g = ui::layout(Rect::new(0, 0, 120, 36), app).geometry;
    let lanes = draw(120, 36, |f| ui::draw_lanes(f, &g, app));
    let rows: Vec<&str> = lanes
        .lines()
        .skip(g.lanes.y as usize)
        .take(g.lanes.height as usize)
        .collect();
    insta::assert_snapshot!("lanes", rows.join("\n"));
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn paused_while_stepping() {
    let mut s = scene(9.0, 120, 36).await;
    s.press(&keys("p")).await;
    let paused = text(&s.render());
    assert!(
        paused.contains("● draining") || paused.contains("● paused"),
        "{paused}"
    );
    s.press(&keys("s")).await;
    insta::assert_snapshot!(text(&s.render()));
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn overlays() {
    let mut s = scene(30.0, 120, 36).await;
    s.press(&keys("?")).await;
    insta::assert_snapshot!("help", text(&s.render()));
    s.press(&keys("esc i")).await;
    insta::assert_snapshot!("palette_inspector", text(&s.render()));
    // Open the rejections by reason.
    s.press(&keys("esc i down down down down down down down down down down down down down down down down down down down down down down right")).await;
    let t = text(&s.render());
    assert!(t.contains("Rejections ("), "{t}");
    s.press(&keys("esc")).await;
    // The awaiting-approval lane holds deploy-prod: select it and inspect.
    s.press(&keys("l l enter")).await;
    insta::assert_snapshot!("node_inspector", text(&s.render()));
    // At 30 s nothing idle is due (checker-1 is manual_release): x asks
    // nothing and says why on the status line.
    s.press(&keys("esc x")).await;
    assert!(s.app.overlays.is_empty(), "no empty question");
    s.press(&keys("q")).await;
    insta::assert_snapshot!("quit_confirmation", text(&s.render()));
    s.finish().await;
    // At 9 s coder-1 is idle and due: the question lists it.
    let mut s = scene(9.0, 120, 36).await;
    s.press(&keys("x")).await;
    insta::assert_snapshot!("release_confirmation", text(&s.render()));
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn approving_from_the_console_runs_the_gate() {
    let mut s = scene(30.0, 120, 36).await;
    s.press(&keys("l l a")).await;
    let t = text(&s.render());
    assert!(t.contains("approved deploy-prod"), "{t}");
    s.finish().await;
}

#[tokio::test(start_paused = true)]
async fn filter_and_ledger_outcome_filter() {
    let mut s = scene(30.0, 120, 36).await;
    s.press(&keys("/ t e s t enter")).await;
    let t = text(&s.render());
    assert!(t.contains("filter: test"), "{t}");
    let lanes: String = t.lines().skip(2).take(18).collect::<Vec<_>>().join("\n");
    assert!(
        lanes.contains("smoke-prod") && !lanes.contains("kickoff"),
        "non-matching operations are hidden: {lanes}"
    );
    s.press(&keys("esc tab tab f f")).await;
    let t = text(&s.render());
    assert!(t.contains("Spawn ledger (dropped"), "{t}");
    assert!(!t.contains("✓ spawn-"), "{t}");
    s.finish().await;
}

/// An agent CLI's live state in the running lane, and its usage and last
/// output lines in the node inspector. The demo runs on sim, so the
/// agent's signals and output are put in by hand, as a runner would.
#[tokio::test(start_paused = true)]
async fn agent_activity_usage_and_output() {
    use playdeck::console::overlay::Overlay;
    use playdeck::kernel::{ActivityState, Lane, Signal, SignalKind, Usage};
    // Wide enough for the running column to show the tool.
    let mut s = scene(12.0, 200, 40).await;
    let ix = s
        .app
        .vm
        .lane(Lane::Running)
        .iter()
        .find(|&i| i != u32::MAX)
        .expect("something runs at 12 s");
    let n = s.app.vm.node(ix).clone();
    let sig = |seq, kind| Signal {
        v: 1,
        seq,
        elapsed: 12.0,
        kind,
    };
    s.app.fold(&sig(
        1_000_000,
        SignalKind::AgentActivity {
            op_id: n.op.op_id,
            name: n.name().clone(),
            attempt: n.attempt,
            state: ActivityState::Tool,
            tool: Some("Bash".into()),
        },
    ));
    s.app.fold(&sig(
        1_000_001,
        SignalKind::AgentUsage {
            op_id: n.op.op_id,
            name: n.name().clone(),
            attempt: n.attempt,
            usage: Usage {
                cost_usd: Some(0.0123),
                input_tokens: Some(12_345),
                output_tokens: Some(678),
                ..Usage::default()
            },
        },
    ));
    s.session.tails.start(
        n.op.op_id,
        n.attempt,
        vec!["claude".into()],
        Some("/runs/demo/logs/op.1.stdout.log".into()),
    );
    s.session.tails.push(
        n.op.op_id,
        false,
        "{\"type\":\"state\",\"state\":\"tool\",\"tool\":\"Bash\"}",
    );
    s.session.tails.push(n.op.op_id, true, "warning: 2 lints");
    s.app.after_fold();
    let screen = text(&s.render());
    assert!(screen.contains("⚙ Bash"), "{screen}");
    insta::assert_snapshot!("agent_running_lane", screen);
    s.app.overlays.push(Overlay::Inspector {
        node: ix,
        scroll: playdeck::console::scroll::ScrollList::text(),
        all: false,
        turns: Default::default(),
    });
    let t = text(&s.render());
    // stderr lines are marked, and both logs are named.
    assert!(t.contains("err│ warning: 2 lints"), "{t}");
    assert!(
        t.contains("/runs/demo/logs/op.1.stdout.log")
            && t.contains("/runs/demo/logs/op.1.stderr.log"),
        "{t}"
    );
    insta::assert_snapshot!("agent_node_inspector", t);
    s.finish().await;
}

/// A cluster attempt no worker has taken is not running yet: its lane row
/// says `◷ waiting for a worker`, and once a worker takes it its run time
/// counts from the take (issue 38).
#[tokio::test(start_paused = true)]
async fn an_attempt_no_worker_has_taken_says_so_and_runs_from_the_take() {
    use playdeck::kernel::{ActivityState, Lane, Signal, SignalKind};
    let mut s = scene(12.0, 200, 40).await;
    let ix = s
        .app
        .vm
        .lane(Lane::Running)
        .iter()
        .find(|&i| i != u32::MAX)
        .expect("something runs at 12 s");
    let n = s.app.vm.node(ix).clone();
    let activity = |seq, elapsed, state| Signal {
        v: 1,
        seq,
        elapsed,
        kind: SignalKind::AgentActivity {
            op_id: n.op.op_id,
            name: n.name().clone(),
            attempt: n.attempt,
            state,
            tool: None,
        },
    };
    s.app
        .fold(&activity(1_000_000, 12.0, ActivityState::WaitingForWorker));
    s.app.after_fold();
    let screen = text(&s.render());
    assert!(screen.contains("◷ waiting for a worker"), "{screen}");
    let started = s.app.vm.node(ix).started_at;
    // Taken at 20 s: it runs from then.
    s.app
        .fold(&activity(1_000_001, 20.0, ActivityState::Waiting));
    s.app.after_fold();
    let screen = text(&s.render());
    assert!(!screen.contains("waiting for a worker"), "{screen}");
    assert_eq!(s.app.vm.node(ix).started_at, Some(20.0), "was {started:?}");
    // Later activity does not move it again.
    s.app
        .fold(&activity(1_000_002, 25.0, ActivityState::Thinking));
    assert_eq!(s.app.vm.node(ix).started_at, Some(20.0));
    s.finish().await;
}

/// An operation waiting for its retry: `↻` and the cause with the time it
/// comes back in the queued lane, the whole story in the inspector.
#[tokio::test(start_paused = true)]
async fn an_operation_waiting_for_its_retry() {
    use playdeck::console::overlay::Overlay;
    use playdeck::kernel::{Lane, Signal, SignalKind};
    // Tall enough for the queued lane to show the row it moves to.
    let mut s = scene(12.0, 120, 50).await;
    let ix = s
        .app
        .vm
        .lane(Lane::Running)
        .iter()
        .find(|&i| i != u32::MAX)
        .expect("something runs at 12 s");
    let n = s.app.vm.node(ix).clone();
    let node = playdeck::kernel::NodeHeader {
        op_id: n.op.op_id,
        name: n.name().clone(),
        parent_id: None,
        depends_on: n.depends_on.clone(),
        pos: playdeck::kernel::log_line::NO_POS,
    };
    s.app.fold(&Signal {
        v: 1,
        seq: 1_000_000,
        elapsed: 12.0,
        kind: SignalKind::RetryScheduled {
            node,
            attempt: 1,
            category: "rate_limit".into(),
            error: "API Error: Request rejected (429) · This request would exceed the rate limit"
                .into(),
            wait_ms: 30_000,
            // 2026-12-02T14:05:03Z
            until: 1_796_220_303_000,
            next: 2,
            of: 3,
        },
    });
    s.app.after_fold();
    let screen = text(&s.render());
    // The queued lane is the first column.
    let row = screen
        .lines()
        .map(|l| l.chars().take(40).collect::<String>())
        .find(|l| l.contains('↻'))
        .unwrap_or_else(|| panic!("a ↻ row in the queued lane: {screen}"));
    // It comes back 30 s after the failure, counted down on the run's clock.
    assert!(
        row.contains("impl-schema") && row.contains("in 30s"),
        "{row}\n{screen}"
    );
    s.app.overlays.push(Overlay::Inspector {
        node: ix,
        scroll: playdeck::console::scroll::ScrollList::text(),
        all: false,
        turns: Default::default(),
    });
    let t = text(&s.render());
    assert!(
        t.contains("its retry: rate limit — attempt 2 of 3 at 14:05:03"),
        "{t}"
    );
    // The failed attempt keeps its cause and error.
    let a = s.app.vm.node(ix).attempts.last().unwrap().clone();
    assert_eq!(
        (a.outcome.as_ref(), a.category.as_deref()),
        ("failed", Some("rate_limit"))
    );
    assert!(a.error.unwrap().contains("exceed the rate limit"));
    s.finish().await;
}

/// A rate limit holds its provider: the operation ready to start on the
/// same agent is marked and says until when, where its role was.
#[tokio::test(start_paused = true)]
async fn an_operation_held_by_its_providers_rate_limit() {
    let play = Play::from_str(
        "limited.toml",
        include_str!("../plays/rate_limited_provider.toml"),
    )
    .unwrap();
    let mut s = Scene::at(&play, 2.0, 120, 30, None).await.unwrap();
    let t = text(&s.render());
    let row = t
        .lines()
        .find(|l| l.contains('◷'))
        .unwrap_or_else(|| panic!("a ◷ row: {t}"));
    // The queued lane widens for what it holds: the words whole.
    assert!(row.contains("┃◷b rate limit until "), "{row}");
    assert!(t.lines().any(|l| l.contains("┃↻a")), "{t}");
    let b = s.app.vm.by_name("b").unwrap().op.op_id;
    let ix = s.app.vm.ix(&b).unwrap();
    let why = s.app.waiting_for(ix).unwrap();
    assert!(why.starts_with("its provider: rate limit until "), "{why}");
    s.finish().await;
}

/// Past the first warning level the header marks the spend.
#[tokio::test(start_paused = true)]
async fn a_spend_warning_is_marked_in_the_header() {
    let play = Play::from_str("warned.toml", include_str!("../plays/spend_warning.toml")).unwrap();
    let mut s = Scene::at(&play, 1.0, 160, 36, None).await.unwrap();
    let t = text(&s.render());
    let header: Vec<&str> = t.lines().take(2).collect();
    assert!(
        header[0].contains("● running") && header[1].contains("⚠ spend 2.50/3.00 USD (83%)"),
        "{}",
        header.join("\n")
    );
    s.finish().await;
}

/// A spend cap in the console: the header says the run is paused by it and
/// what was spent; `$` offers to raise it by half, says the numbers, and
/// the raise lets the held work go on.
#[tokio::test(start_paused = true)]
async fn a_spend_cap_pauses_the_run_and_dollar_raises_it() {
    let play = Play::from_str(
        "capped.toml",
        include_str!("../plays/spend_cap_and_raise.toml"),
    )
    .unwrap();
    let mut s = Scene::at(&play, 3.0, 160, 36, None).await.unwrap();
    let t = text(&s.render());
    let header: Vec<&str> = t.lines().take(2).collect();
    assert!(
        header[0].contains("paused — budget 5.00/5.00 USD"),
        "{}",
        header.join("\n")
    );
    assert!(
        header[1].contains(
            "spend 5.00/5.00 USD (100%) · 2 480 tok  eta — waits for a raise of the spend cap"
        ),
        "{}",
        header.join("\n")
    );
    // The held operation says what holds it.
    let row = t
        .lines()
        .find(|l| l.contains('◷'))
        .unwrap_or_else(|| panic!("a ◷ row: {t}"));
    assert!(row.contains("┃◷c budget 5.00/5.00 USD"), "{row}");
    // The budgets pane: the run's cap as a gauge, the role's cap below.
    insta::assert_snapshot!(
        "budgets_at_the_cap",
        draw(44, 9, |f| ui::draw_budgets(f, f.area(), &s.app))
    );
    s.press(&keys("$")).await;
    let t = text(&s.render());
    assert!(
        t.contains(
            "Raise the run's usd cap from 5.00 USD to 7.50 USD? (5.00/5.00 USD spent; leaves 2.50 USD)"
        ),
        "{t}"
    );
    s.press(&keys("y +2")).await;
    let t = text(&s.render());
    let header: Vec<&str> = t.lines().take(2).collect();
    assert!(
        header[0].contains("finished: succeeded"),
        "{}",
        header.join("\n")
    );
    assert!(
        header[1].contains("spend 7.50/7.50 USD (100%)"),
        "{}",
        header.join("\n")
    );
    s.finish().await;
}

/// Following an agent (`F`): its attempt's conversation over the whole
/// screen but the footer — the real claude's streamed deltas assembled
/// into its message, each tool call with its result, a refused one said in
/// words, stderr marked — and `r` the lines as printed. The demo runs on
/// sim, which writes no logs: they are written here as an agent CLI's
/// runner writes them.
#[tokio::test(start_paused = true)]
async fn following_an_agent_full_screen() {
    use playdeck::kernel::Lane;
    let mut s = scene(12.0, 120, 36).await;
    let ix = s
        .app
        .vm
        .lane(Lane::Running)
        .iter()
        .next()
        .expect("something runs at 12 s");
    let n = s.app.vm.node(ix).clone();
    let logs = s.app.hooks.run_dir.clone().unwrap().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let base = format!("{}.{}", n.name(), n.attempt);
    let mut stdout = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/realcli/captures/claude/2.1.332/tool-partial.jsonl"
    ))
    .unwrap();
    // A tool the role may not use, refused by the CLI: said in words.
    stdout.push_str(
        r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"rm -rf build"}}]}}"#,
    );
    stdout.push('\n');
    stdout.push_str(
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"<tool_use_error>Bash exists but is not enabled in this context.</tool_use_error>"}]}}"#,
    );
    stdout.push('\n');
    let printed = stdout.lines().count();
    std::fs::write(logs.join(format!("{base}.stdout.log")), stdout).unwrap();
    std::fs::write(
        logs.join(format!("{base}.stderr.log")),
        "warning: unused variable `retries`\n\x1b[31merror\x1b[0m: flaky test quarantined\n",
    )
    .unwrap();
    s.app.go_to(ix);
    s.press(&keys("F")).await;
    let t = text(&s.render());
    assert!(
        t.contains(&format!("Following {} · attempt {}", n.name(), n.attempt)),
        "{t}"
    );
    // Its words once, assembled from four deltas; the call and its result.
    assert_eq!(
        t.matches("● I created hello.txt containing hi.").count(),
        1,
        "{t}"
    );
    assert!(t.contains("⚙ Write(/tmp/realcli-claude-"), "{t}");
    assert!(t.contains("✓ File created successfully"), "{t}");
    assert!(
        t.contains("⚙ Bash(rm -rf build)")
            && t.contains("✗ Bash exists but is not enabled in this context.")
            && !t.contains("tool_use_error"),
        "{t}"
    );
    assert!(t.contains("err│ error: flaky test quarantined"), "{t}");
    assert!(!t.contains("stream_event"), "no wire protocol: {t}");
    insta::assert_snapshot!("follow_view", t);
    // `r`: the lines as the CLI printed them.
    s.press(&keys("r")).await;
    let t = text(&s.render());
    assert!(t.contains(r#"{"type":"stream_event""#), "{t}");
    assert!(t.contains("as printed"), "{t}");
    assert!(
        t.contains("✗ a tool call was refused or failed: Bash exists but is not enabled"),
        "{t}"
    );
    assert!(printed > 20);
    s.press(&keys("r")).await;
    assert!(text(&s.render()).contains("● I created hello.txt"));
    // The node inspector has the last turns.
    s.press(&keys("esc enter")).await;
    let t = text(&s.render());
    assert!(
        t.contains("last turns  (attempt 1; F follows all of it)"),
        "{t}"
    );
    assert!(t.contains("⚙ Bash(rm -rf build)"), "{t}");
    assert!(t.contains("● I created hello.txt containing hi."), "{t}");
    s.finish().await;
}

/// Following an operation that has not started: said in words, with what
/// it waits for, never an empty pane.
#[tokio::test(start_paused = true)]
async fn following_an_operation_that_has_not_started() {
    use playdeck::kernel::Lane;
    let mut s = scene(12.0, 120, 36).await;
    let ix = s
        .app
        .vm
        .lane(Lane::Queued)
        .iter()
        .next()
        .expect("something waits at 12 s");
    s.app.go_to(ix);
    s.press(&keys("F")).await;
    let t = text(&s.render());
    let name = s.app.vm.node(ix).name().to_string();
    assert!(
        t.contains(&format!("{name} has not started an attempt yet.")),
        "{t}"
    );
    insta::assert_snapshot!("follow_not_started", t);
    s.finish().await;
}
