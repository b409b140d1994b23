//! The console as an operator meets it (issue 15), on ratatui's TestBackend
//! with runs played under tokio's paused clock: decisions are safe, every
//! detail is readable, the status is honest. Whole windows are insta
//! snapshots; the rest are assertions on the rendered text and the run's
//! own log.

use crate::common;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use playdeck::console::keymap::{Action, Mode};
use playdeck::console::overlay::Overlay;

use common::screen_text as text;
use playdeck::console::screenshot::Scene;
use playdeck::kernel::agent::QuestionKind;
use playdeck::kernel::{Lane, Outcome, SignalKind};
use playdeck::play::Play;
use playdeck::session::SessionOptions;

fn keys(k: &str) -> Vec<String> {
    k.split_whitespace().map(str::to_string).collect()
}

fn key(code: KeyCode, ctrl: bool) -> KeyEvent {
    KeyEvent::new(
        code,
        if ctrl {
            KeyModifiers::CONTROL
        } else {
            KeyModifiers::NONE
        },
    )
}

/// Types text into whatever has the keys.
async fn type_text(s: &mut Scene, t: &str) {
    for c in t.chars() {
        s.key(key(KeyCode::Char(c), false)).await;
    }
}

async fn demo(at: f64, w: u16, h: u16) -> Scene {
    Scene::at(&Play::demo(), at, w, h, None).await.unwrap()
}

fn play(text: &str) -> Play {
    Play::from_str_in("test.toml", text, std::path::Path::new(".")).unwrap()
}

/// Fails, skips what follows and escalates; finishes in about a second.
const FAILS: &str = include_str!("../plays/fails_skips_escalates.toml");

/// FAILS with a gate that keeps the run going until someone decides.
fn fails_held_open() -> Play {
    play(&format!(
        "{FAILS}\n[[operations]]\nid = \"gate\"\nrole = \"reviewer\"\ninstruction = \"sign off\"\nindependent_root = true\napproval = true\nsim = {{ duration_ms = 100 }}\n"
    ))
}

fn selected_name(s: &Scene) -> Option<String> {
    s.app
        .selected_node()
        .map(|ix| s.app.vm.node(ix).name().to_string())
}

/// Moves the lane cursor to `name`.
fn select(s: &mut Scene, name: &str) {
    let ix = s
        .app
        .vm
        .by_name(name)
        .map(|n| s.app.vm.ix(&n.op.op_id).unwrap())
        .unwrap_or_else(|| panic!("no operation {name}"));
    s.app.go_to(ix);
    assert_eq!(selected_name(s).as_deref(), Some(name));
}

fn status(s: &Scene) -> String {
    s.app
        .status
        .as_ref()
        .map(|st| st.text.clone())
        .unwrap_or_default()
}

mod decisions {
    use super::*;

    /// Three gates and some work beside them.
    fn gates3() -> Play {
        let mut p = String::from(
            "[play]\nname = \"gates\"\n[palette]\nroles = [{ role = \"reviewer\" }]\n[[operations]]\nid = \"work\"\nrole = \"reviewer\"\ninstruction = \"w\"\nindependent_root = true\nsim = { duration_ms = 60000 }\n",
        );
        for (i, g) in ["gate-a", "gate-b", "gate-c"].iter().enumerate() {
            p.push_str(&format!(
                "[[operations]]\nid = \"{g}\"\nrole = \"reviewer\"\ninstruction = \"sign\"\nindependent_root = true\napproval = true\nsim = {{ duration_ms = {} }}\n",
                100 + i
            ));
        }
        play(&p)
    }

    /// m marks gates; a then asks once, listing them, and approves each.
    #[tokio::test(start_paused = true)]
    async fn marked_gates_are_approved_together_after_one_question() {
        let mut s = Scene::at(&gates3(), 1.0, 120, 36, None).await.unwrap();
        // Only gates are marked.
        select(&mut s, "work");
        s.press(&keys("m")).await;
        assert!(
            status(&s).contains("gates are marked to approve several at once"),
            "{}",
            status(&s)
        );
        select(&mut s, "gate-a");
        s.press(&keys("m")).await;
        select(&mut s, "gate-c");
        s.press(&keys("m")).await;
        assert!(status(&s).contains("2 gates marked"), "{}", status(&s));
        let t = text(&s.render());
        assert!(t.contains("◆gate-a") && t.contains("◆gate-c"), "{t}");
        assert!(
            t.contains("2 marked: a approve"),
            "the footer names them: {t}"
        );
        s.press(&keys("a")).await;
        let t = text(&s.render());
        assert!(t.contains("Approve these 2 operations?"), "{t}");
        assert!(t.contains("⚑ gate-a") && t.contains("⚑ gate-c"), "{t}");
        assert!(!t.contains("⚑ gate-b"), "{t}");
        insta::assert_snapshot!("approve_marked", t);
        s.press(&keys("y")).await;
        s.wait(0.5).await;
        let approved = |s: &Scene, n: &str| {
            s.app.vm.by_name(n).unwrap().lane != playdeck::kernel::Lane::AwaitingApproval
        };
        assert!(approved(&s, "gate-a") && approved(&s, "gate-c"));
        assert!(!approved(&s, "gate-b"));
        assert!(s.app.marks.is_empty());
        s.finish().await;
    }

    /// a away from any gate asks about the oldest one, by name; n says no.
    #[tokio::test(start_paused = true)]
    async fn approve_from_anywhere_names_the_oldest_gate_first() {
        let mut s = Scene::at(&gates3(), 1.0, 120, 36, None).await.unwrap();
        select(&mut s, "work");
        let t = text(&s.render());
        assert!(t.contains("gate-a: a approve"), "the footer names it: {t}");
        s.press(&keys("a")).await;
        let t = text(&s.render());
        assert!(
            t.contains("Approve gate-a?") && t.contains("waited longest"),
            "{t}"
        );
        s.press(&keys("n")).await;
        s.wait(0.2).await;
        assert_eq!(
            s.app.vm.by_name("gate-a").unwrap().lane,
            playdeck::kernel::Lane::AwaitingApproval,
            "no is no"
        );
        // d asks too, naming it.
        s.press(&keys("d")).await;
        assert!(text(&s.render()).contains("Deny gate-a?"));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn too_small_blocks_every_key_but_quit_and_quit_quits() {
        let mut s = demo(30.0, 120, 36).await;
        select(&mut s, "deploy-prod");
        s.resize(70, 20);
        let t = text(&s.render());
        assert!(t.contains("The terminal is too small"), "{t}");
        assert!(t.contains("no other key does"), "{t}");
        assert_eq!(s.app.mode(), Mode::TooSmall);
        // deny, approve, release, help, filter, pause: none acts on the
        // hidden screen.
        s.press(&keys("d a x ? / p enter")).await;
        assert!(s.app.overlays.is_empty(), "no hidden dialog opened");
        let n = s.app.vm.by_name("deploy-prod").unwrap();
        assert_eq!(n.lane, Lane::AwaitingApproval, "not decided");
        assert!(!s.app.vm.run.paused);
        assert!(!s.app.should_exit);
        // Quit needs no question it could not show.
        s.press(&keys("q")).await;
        assert!(s.app.should_exit && s.app.quitting);
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn deny_asks_first_and_records_the_reason() {
        let mut s = demo(30.0, 120, 36).await;
        select(&mut s, "deploy-prod");
        // Asked, and cancelled: nothing happens to the gate.
        s.press(&keys("d")).await;
        assert!(matches!(s.app.overlay(), Some(Overlay::Deny { .. })));
        s.press(&keys("esc")).await;
        assert!(s.app.overlays.is_empty());
        assert_eq!(
            s.app.vm.by_name("deploy-prod").unwrap().lane,
            Lane::AwaitingApproval
        );
        // Asked, with a reason typed (q and ? are text here).
        s.press(&keys("d")).await;
        type_text(&mut s, "not on a Friday? q").await;
        insta::assert_snapshot!("deny_with_a_reason", text(&s.render()));
        s.press(&keys("enter")).await;
        assert_eq!(status(&s), "denied deploy-prod");
        let denied = s
            .log()
            .into_iter()
            .find_map(|sig| match sig.kind {
                SignalKind::Denied {
                    node, by, reason, ..
                } => Some((node.name, by, reason)),
                _ => None,
            })
            .expect("a denial in the log");
        assert_eq!(&*denied.0, "deploy-prod");
        assert!(
            denied.1.starts_with("console ("),
            "who denied: {}",
            denied.1
        );
        assert_eq!(&*denied.2, "not on a Friday? q");
        s.finish().await;
    }

    /// The diff view (issue 41): `]`/`[` by hunk, `}`/`{` by file, `c` a
    /// note on a line (marked ✎, said at the bottom), and `T` from it
    /// sends the work back with every note, each naming its file and line.
    #[tokio::test(start_paused = true)]
    async fn the_diff_view_moves_by_hunk_and_file_and_its_notes_go_with_a_send_back() {
        use playdeck::console::diffview::DiffView;
        let mut s = demo(12.0, 120, 36).await;
        select(&mut s, "impl-schema");
        let ix = s.app.selected_node().unwrap();
        let diff = [
            "# what impl-schema would land on playdeck/r1",
            "diff --git a/a.txt b/a.txt",
            "--- a/a.txt",
            "+++ b/a.txt",
            "@@ -1,2 +1,2 @@",
            " one",
            "-two",
            "+deux",
            "@@ -9 +9 @@",
            "-nine",
            "+neuf",
            "diff --git a/b.txt b/b.txt",
            "--- /dev/null",
            "+++ b/b.txt",
            "@@ -0,0 +1 @@",
            "+brand new",
        ]
        .join("\n");
        s.app.overlays.push(Overlay::Diff(Box::new(DiffView::new(
            ix,
            "impl-schema",
            "what impl-schema would land on playdeck/r1".into(),
            &diff,
        ))));
        s.press(&keys("]")).await;
        let t = text(&s.render());
        assert!(
            t.contains("Diff · impl-schema · file 1/2 · hunk 1/3"),
            "{t}"
        );
        assert!(
            t.contains("what impl-schema would land on playdeck/r1"),
            "{t}"
        );
        s.press(&keys("j j j")).await;
        s.press(&keys("c")).await;
        type_text(&mut s, "why deux?").await;
        s.press(&keys("enter")).await;
        assert!(
            status(&s).starts_with("1 note(s) on the diff"),
            "{}",
            status(&s)
        );
        let t = text(&s.render());
        assert!(t.contains("✎ +deux"), "{t}");
        assert!(t.contains("✎ why deux?"), "the cursor's note: {t}");
        s.press(&keys("] ]")).await;
        assert!(text(&s.render()).contains("file 2/2 · hunk 3/3"));
        s.press(&keys("]")).await;
        assert_eq!(status(&s), "this is the last hunk");
        // Back: to this file's start, then the one before.
        s.press(&keys("{ {")).await;
        assert!(text(&s.render()).contains("file 1/2"));
        // A note goes on a line of a file, not on a header.
        s.press(&keys("c")).await;
        assert!(
            status(&s).starts_with("a note goes on a line of a file"),
            "{}",
            status(&s)
        );
        s.press(&keys("T")).await;
        match s.app.overlay() {
            Some(Overlay::Say { text, .. }) => {
                assert_eq!(text, "Notes on your diff: a.txt:2 (+deux): why deux?");
            }
            _ => panic!("the send-back dialog"),
        }
        s.finish().await;
    }

    /// `a` in a review's diff view whose operation this console no longer
    /// shows waiting (sent back; its next review not seen here yet) still
    /// sends the approval of what the view showed: the run refuses it as
    /// stale, and the console asks again once it shows the op waiting.
    #[tokio::test(start_paused = true)]
    async fn approving_from_a_diff_view_the_lanes_have_left_asks_the_run() {
        use playdeck::console::diffview::DiffView;
        let mut s = demo(12.0, 120, 36).await;
        select(&mut s, "impl-schema");
        let ix = s.app.selected_node().unwrap();
        assert_ne!(s.app.vm.node(ix).lane, Lane::AwaitingApproval);
        let mut view = DiffView::new(ix, "impl-schema", "t".into(), "+x");
        view.basis = Some("review@3:aaaa..bbbb".parse().unwrap());
        s.app.overlays.push(Overlay::Diff(Box::new(view)));
        s.press(&keys("a")).await;
        // The run refuses it, saying what is there now (before, the
        // console refused the key itself, the run never asked).
        assert!(
            status(&s).starts_with(
                "impl-schema: not decided — you decided on its work waiting for review (event 3)"
            ),
            "{}",
            status(&s)
        );
        assert_eq!(s.app.reask.as_deref(), Some("impl-schema"));
        assert!(
            !matches!(s.app.overlay(), Some(Overlay::Diff(_))),
            "the diff view closed"
        );
        s.finish().await;
    }

    /// Breakpoints in the console (issue 42): `b` sets one on the selected
    /// operation (and `b` again clears it), `B` lists them and `x` clears
    /// the selected one, `U` runs to a queued operation; the run's pause
    /// says its cause in the header and on the status line.
    #[tokio::test(start_paused = true)]
    async fn b_sets_a_breakpoint_and_the_run_pauses_before_it_with_the_cause_said() {
        let mut s = demo(0.0, 160, 40).await;
        let queued = s
            .app
            .vm
            .lane(Lane::Queued)
            .iter()
            .next()
            .expect("queued at the start");
        let name = s.app.vm.node(queued).name().to_string();
        select(&mut s, &name);
        s.press(&keys("b")).await;
        assert_eq!(
            status(&s),
            format!("breakpoint {name}: the run pauses there")
        );
        assert_eq!(
            s.app.vm.run.breakpoints,
            vec![std::sync::Arc::from(name.as_str())]
        );
        // b again clears it.
        select(&mut s, &name);
        s.press(&keys("b")).await;
        assert!(s.app.vm.run.breakpoints.is_empty(), "cleared");
        s.press(&keys("b")).await;
        s.press(&keys("B")).await;
        let t = text(&s.render());
        assert!(t.contains("Breakpoints (1)"), "{t}");
        assert!(t.contains(&format!("› {name}")), "{t}");
        s.press(&keys("x")).await;
        assert!(s.app.vm.run.breakpoints.is_empty(), "x cleared it");
        s.press(&keys("esc")).await;
        // Run to here: the run pauses before it starts, and says so.
        s.press(&keys("p")).await;
        select(&mut s, &name);
        s.press(&keys("U")).await;
        s.wait(60.0).await;
        let t = text(&s.render());
        let cause = format!("{name} is about to start (run to here)");
        assert!(
            t.contains(&format!("paused at a breakpoint — {cause}")),
            "{t}"
        );
        assert!(
            s.app
                .messages
                .iter()
                .any(|m| m.text.starts_with(&format!("paused: {cause}")))
        );
        s.finish().await;
    }

    /// A read-only console (issue 42) says so in its header.
    #[tokio::test(start_paused = true)]
    async fn a_read_only_console_says_so_in_its_header() {
        let mut s = demo(12.0, 160, 40).await;
        let first = |s: &mut Scene| text(&s.render()).lines().next().unwrap_or("").to_string();
        assert!(!first(&mut s).contains("read-only"));
        s.app.hooks.read_only = true;
        let top = first(&mut s);
        assert!(top.contains("read-only"), "{top}");
        s.finish().await;
    }

    /// `T` on a running operation asks what to say and sends it to the
    /// run; the demo's sim agents keep no conversation, which the run
    /// says (the binary's tests deliver to an agent that keeps one).
    #[tokio::test(start_paused = true)]
    async fn t_asks_what_to_say_to_a_running_agent_and_the_run_answers() {
        let mut s = demo(12.0, 120, 36).await;
        select(&mut s, "impl-schema");
        s.press(&keys("T")).await;
        assert!(matches!(
            s.app.overlay(),
            Some(Overlay::Say { running: true, .. })
        ));
        // Nothing typed: nothing sent, the dialog stays.
        s.press(&keys("enter")).await;
        assert!(matches!(s.app.overlay(), Some(Overlay::Say { .. })));
        assert!(status(&s).starts_with("nothing to say"), "{}", status(&s));
        type_text(&mut s, "use the v2 schema").await;
        let t = text(&s.render());
        assert!(t.contains("Talk to impl-schema's agent"), "{t}");
        assert!(t.contains("use the v2 schema"), "{t}");
        s.press(&keys("enter")).await;
        assert!(s.app.overlays.is_empty());
        assert_eq!(
            status(&s),
            "impl-schema is running; its agent has named no conversation to continue (not yet, or its CLI names none)"
        );
        // A queued one cannot be talked to: said, no dialog.
        select(&mut s, "impl-api");
        s.press(&keys("T")).await;
        assert!(s.app.overlays.is_empty());
        assert!(
            status(&s).contains("not running, failed, succeeded or waiting for review"),
            "{}",
            status(&s)
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn quit_asks_and_a_second_ctrl_c_answers() {
        let mut s = demo(12.0, 120, 36).await;
        s.key(key(KeyCode::Char('c'), true)).await;
        assert!(matches!(s.app.overlay(), Some(Overlay::ConfirmQuit)));
        let t = text(&s.render());
        assert!(t.contains("q/ctrl-c again quits too"), "{t}");
        s.key(key(KeyCode::Char('c'), true)).await;
        assert!(s.app.quitting, "the second ctrl-c confirms");
        s.wait(1.0).await;
        assert!(s.app.should_exit, "and the console leaves once cancelled");
        assert_eq!(s.app.vm.run.finished, Some(Outcome::Cancelled));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn retry_on_a_finished_run_offers_the_resume_command() {
        let mut s = Scene::at(&play(FAILS), 5.0, 120, 36, None).await.unwrap();
        assert_eq!(s.app.vm.run.finished, Some(Outcome::Failed));
        select(&mut s, "integration-tests");
        s.press(&keys("R")).await;
        let name = s.app.resume_name();
        let st = status(&s);
        assert!(
            st.contains(&format!("playdeck resume {name} --retry integration-tests")),
            "{st}"
        );
        assert_eq!(s.app.retry_offer.as_deref(), Some("integration-tests"));
        let line = playdeck::console::run::exit_line(
            &s.app,
            Outcome::Failed,
            playdeck::console::run::Ended::Quit,
        );
        assert!(
            line.ends_with("--retry integration-tests"),
            "the exit line repeats it: {line}"
        );
        // Something that did not fail is not offered.
        select(&mut s, "load-tests");
        s.press(&keys("R")).await;
        assert!(status(&s).contains("has not failed"), "{}", status(&s));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn step_starts_the_selected_paused_operation() {
        let p = play(include_str!("../plays/step_paused.toml"));
        let dir = tempfile::tempdir().unwrap();
        let opts = SessionOptions {
            run_dir: Some(dir.path().join("run")),
            run_id: Some("step".into()),
            control: false,
            paused: true,
            ..SessionOptions::default()
        };
        let mut s = Scene::with(&p, opts, dir, 1.0, 120, 36, None)
            .await
            .unwrap();
        assert_eq!(s.app.vm.count(Lane::Paused), 2);
        select(&mut s, "second");
        let t = text(&s.render());
        assert!(t.contains("s step"), "the footer offers it: {t}");
        s.press(&keys("s")).await;
        assert_eq!(status(&s), "step: second started");
        assert_eq!(s.app.vm.by_name("second").unwrap().lane, Lane::Running);
        assert_eq!(s.app.vm.by_name("first").unwrap().lane, Lane::Paused);
        // With nothing paused selected, the next one starts.
        select(&mut s, "second");
        s.press(&keys("s")).await;
        assert_eq!(status(&s), "step: first started");
        s.finish().await;
    }
}

mod details {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_ledger_row_opens_into_its_detail_and_goes_to_the_operation() {
        let mut s = demo(30.0, 120, 36).await;
        // The ledger, newest first: spawn-6 refused at the cap, then spawn-5.
        s.press(&keys("tab tab enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("Spawn request · dropped (max_spawn_exceeded)"),
            "{t}"
        );
        assert!(
            t.contains("spawn-6 refused: 5 of max_spawn 5 already accepted"),
            "the full reason: {t}"
        );
        assert!(
            s.app.available(Action::GoTo).is_err(),
            "a dropped request became nothing to go to"
        );
        s.press(&keys("esc down enter")).await;
        let t = text(&s.render());
        insta::assert_snapshot!("ledger_row_detail", t);
        assert!(
            t.contains("accepted as spawn-5") && t.contains("unit-tests"),
            "{t}"
        );
        s.press(&keys("enter")).await;
        match s.app.overlay() {
            Some(Overlay::Inspector { node, .. }) => {
                assert_eq!(&**s.app.vm.node(*node).name(), "spawn-5");
            }
            _ => panic!("go to opens the spawned operation"),
        }
        assert_eq!(selected_name(&s).as_deref(), Some("spawn-5"));
        s.finish().await;
    }

    /// The agent CLI's conversation id, as its stream named it (issue
    /// 40), is in the node inspector of the attempt it belongs to.
    #[tokio::test(start_paused = true)]
    async fn the_inspector_shows_the_session_the_agent_named() {
        let mut s = demo(12.0, 120, 36).await;
        select(&mut s, "impl-schema");
        let ix = s.app.selected_node().expect("selected");
        let (op_id, name, attempt) = {
            let n = s.app.vm.node(ix);
            (n.op.op_id, n.name().clone(), n.attempt)
        };
        let sig = playdeck::kernel::Signal {
            v: 1,
            seq: s.app.vm.seq + 1,
            elapsed: 12.0,
            kind: SignalKind::AgentSession {
                op_id,
                name,
                attempt,
                session: "ses_dc8b8a0c2ffenHwOkMfeMy4m6T".into(),
            },
        };
        s.app.fold(&sig);
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("session     ses_dc8b8a0c2ffenHwOkMfeMy4m6T"),
            "{t}"
        );
        s.finish().await;
    }

    /// Bulk review (issue 41) works as bulk approval does: reviews are
    /// marked like gates, and `a` asks once, naming each with its mark.
    #[tokio::test(start_paused = true)]
    async fn reviews_are_marked_and_approved_together_as_gates_are() {
        let mut s = demo(12.0, 160, 40).await;
        let running: Vec<u32> = s.app.vm.lane(Lane::Running).iter().take(2).collect();
        assert_eq!(running.len(), 2, "two running in the demo at 12 s");
        let mut names = Vec::new();
        for (seq, &ix) in (s.app.vm.seq + 1..).zip(running.iter()) {
            let n = s.app.vm.node(ix);
            names.push(n.name().to_string());
            let node = playdeck::kernel::signal::NodeHeader {
                op_id: n.op.op_id,
                name: n.name().clone(),
                parent_id: None,
                depends_on: n.depends_on.clone(),
                pos: playdeck::kernel::log_line::NO_POS,
            };
            let attempt = n.attempt;
            s.app.fold(&playdeck::kernel::Signal {
                v: 1,
                seq,
                elapsed: 12.0,
                kind: SignalKind::PermissionAsked {
                    node,
                    attempt,
                    tool: "1 file changed, 1 insertion(+)".into(),
                    kind: QuestionKind::Review,
                    on: None,
                    detail: None,
                },
            });
        }
        // The lanes are laid out anew at the next frame.
        s.render();
        for name in &names {
            select(&mut s, name);
            s.press(&keys("m")).await;
        }
        s.press(&keys("a")).await;
        match s.app.overlay() {
            Some(Overlay::ConfirmApprove { ops, .. }) => assert_eq!(ops, &names),
            _ => panic!("one question for both"),
        }
        let t = text(&s.render());
        assert!(t.contains("◧ 1 file changed"), "{t}");
        s.finish().await;
    }

    /// The header the signals about operation `ix` carry, for signals a
    /// test folds in itself.
    fn header_of(s: &Scene, ix: u32) -> playdeck::kernel::signal::NodeHeader {
        let n = s.app.vm.node(ix);
        playdeck::kernel::signal::NodeHeader {
            op_id: n.op.op_id,
            name: n.name().clone(),
            parent_id: None,
            depends_on: n.depends_on.clone(),
            pos: playdeck::kernel::log_line::NO_POS,
        }
    }

    /// Folds `kind` in as the run's next signal, at 12 s.
    fn fold_next(s: &mut Scene, kind: SignalKind) {
        let seq = s.app.vm.seq + 1;
        s.app.fold(&playdeck::kernel::Signal {
            v: 1,
            seq,
            elapsed: 12.0,
            kind,
        });
    }

    /// Issue 55: a permission question shows what the call would do,
    /// whole — in the inspector, on the status line of `n`, in the problems
    /// list (not as an ordinary gate) — and a call that was denied stays
    /// visible on the operation.
    #[tokio::test(start_paused = true)]
    async fn a_permission_question_shows_the_whole_call_and_a_denial_stays_on_the_operation() {
        let mut s = demo(12.0, 160, 40).await;
        select(&mut s, "impl-schema");
        let ix = s.app.selected_node().expect("selected");
        let node = header_of(&s, ix);
        let attempt = s.app.vm.node(ix).attempt;
        let long = format!("echo {} ; rm -rf /srv/data", "a".repeat(300));
        let fold = fold_next;
        fold(
            &mut s,
            SignalKind::PermissionAsked {
                node: node.clone(),
                attempt,
                tool: "Bash(echo aaaa…)".into(),
                kind: QuestionKind::Permission,
                on: Some("Bash:0011223344556677".into()),
                detail: Some(format!("# clean up\n$ {long}").into()),
            },
        );
        // The inspector: the call as it would run, whole.
        s.render();
        select(&mut s, "impl-schema");
        s.press(&keys("enter")).await;
        s.press(&keys("space")).await;
        let t = text(&s.render());
        assert!(t.contains("│ # clean up"), "{t}");
        assert!(t.contains("; rm -rf /srv/data"), "the end of it: {t}");
        s.press(&keys("esc")).await;
        // n: what it asks, in words, not "waits for approval".
        s.press(&keys("n")).await;
        let mut at = 0;
        while !status(&s).contains("impl-schema") && at < 8 {
            s.press(&keys("n")).await;
            at += 1;
        }
        let st = status(&s);
        assert!(st.contains("⚿ asks permission: $ echo aaa"), "{st}");
        // P: a question, marked as one.
        s.press(&keys("P")).await;
        let t = text(&s.render());
        assert!(t.contains("Problems ("), "{t}");
        let row = t
            .lines()
            .find(|l| l.contains("⚿ impl-schema"))
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            row.contains("asks") && row.contains("⚿ asks permission: $ echo"),
            "{row}"
        );
        assert!(!row.contains("approval by an operator"), "{row}");
        s.press(&keys("esc")).await;
        fold(
            &mut s,
            SignalKind::PermissionAnswered {
                node: node.clone(),
                attempt,
                tool: "Bash(echo aaaa…)".into(),
                allowed: false,
                by: "ctl (bo)".into(),
                reason: Some("not on the server".into()),
                kind: QuestionKind::Permission,
                on: Some("Bash:0011223344556677".into()),
            },
        );
        s.render();
        select(&mut s, "impl-schema");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("call denied by ctl (bo)") && t.contains("not on the server"),
            "a denied call stays on the operation: {t}"
        );
        s.finish().await;
    }

    /// Issue 55: a run begun from a checkout with uncommitted changes says
    /// in the header that they are not part of its base, and which.
    #[tokio::test(start_paused = true)]
    async fn the_header_says_what_the_runs_base_leaves_out() {
        let mut s = demo(2.0, 200, 40).await;
        let seq = s.app.vm.seq + 1;
        s.app.fold(&playdeck::kernel::Signal {
            v: 1,
            seq,
            elapsed: 2.0,
            kind: SignalKind::Workspace {
                branch: "playdeck/r1".into(),
                base: "5e6f7a8b9c0d1e2f".into(),
                uncommitted: vec!["README".into(), "notes.txt".into()],
            },
        });
        let t = text(&s.render());
        let header = t.lines().next().unwrap_or_default();
        assert!(
            header.contains(
                "⚠ 2 uncommitted files are not in the run's base (5e6f7a8b9c0d): README, notes.txt"
            ),
            "{header}"
        );
        s.finish().await;
    }

    /// A running agent's permission question (issue 40): its operation
    /// waits in the approval lane, marked ⚿, with the call it asks about in
    /// place of its role, and goes back to running when answered.
    #[tokio::test(start_paused = true)]
    async fn a_permission_question_waits_in_the_approval_lane_with_its_call() {
        let mut s = demo(12.0, 160, 40).await;
        select(&mut s, "impl-schema");
        let ix = s.app.selected_node().expect("selected");
        let node = header_of(&s, ix);
        let attempt = s.app.vm.node(ix).attempt;
        let fold = fold_next;
        fold(
            &mut s,
            SignalKind::PermissionAsked {
                node: node.clone(),
                attempt,
                tool: "Bash(rm -rf build)".into(),
                kind: QuestionKind::Permission,
                on: None,
                detail: None,
            },
        );
        assert_eq!(s.app.vm.node(ix).lane, Lane::AwaitingApproval);
        let t = text(&s.render());
        assert!(t.contains("⚿impl-schema"), "{t}");
        // The inspector says the call whole, and how to answer.
        select(&mut s, "impl-schema");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("⚿ asks permission  (a allows it, d denies it)"),
            "{t}"
        );
        assert!(t.contains("  Bash(rm -rf build)"), "{t}");
        s.press(&keys("esc")).await;
        fold(
            &mut s,
            SignalKind::PermissionAnswered {
                node: node.clone(),
                attempt,
                tool: "Bash(rm -rf build)".into(),
                allowed: true,
                by: "console (ana)".into(),
                reason: None,
                kind: QuestionKind::Permission,
                on: None,
            },
        );
        assert_eq!(s.app.vm.node(ix).lane, Lane::Running);
        assert!(!text(&s.render()).contains('⚿'));
        // Issue 41: its work waits for review, then clashes as it lands;
        // each is marked as what it is, and the inspector says the keys.
        for (kind, what, mark, head) in [
            (
                QuestionKind::Review,
                "2 files changed, 3 insertions(+)",
                "◧impl-schema",
                "◧ awaiting review  (a lands it, d rejects it, T sends it back with a note)",
            ),
            (
                QuestionKind::Conflict,
                "clash.txt clash with playdeck/r1",
                "✕impl-schema",
                "✕ merge conflict  (S opens a shell in its worktree; a lands it once resolved",
            ),
        ] {
            fold(
                &mut s,
                SignalKind::PermissionAsked {
                    node: node.clone(),
                    attempt,
                    tool: what.into(),
                    kind,
                    on: None,
                    detail: None,
                },
            );
            let t = text(&s.render());
            assert!(t.contains(mark), "{t}");
            // From the diff view too, `a` answers it.
            s.app.overlays.push(Overlay::Diff(Box::new(
                playdeck::console::diffview::DiffView::new(ix, "impl-schema", "t".into(), "+x"),
            )));
            s.press(&keys("a")).await;
            // Sent to the run on the question the console showed: this one
            // was never the run's, which refuses it as stale; the console
            // asks again (the view still shows it waiting).
            assert!(
                status(&s).starts_with("impl-schema: not decided — you decided on"),
                "sent to the run: {}",
                status(&s)
            );
            assert!(
                matches!(s.app.overlay(), Some(Overlay::ConfirmApprove { ops, .. }) if ops == &["impl-schema"]),
                "asked again, the diff view closed"
            );
            s.press(&keys("esc")).await;
            s.press(&keys("enter")).await;
            let t = text(&s.render());
            assert!(t.contains(head), "{t}");
            assert!(t.contains(&format!("  {what}")), "{t}");
            s.press(&keys("esc")).await;
            fold(
                &mut s,
                SignalKind::PermissionAnswered {
                    node: node.clone(),
                    attempt,
                    tool: what.into(),
                    allowed: true,
                    by: "console (ana)".into(),
                    reason: None,
                    kind,
                    on: None,
                },
            );
            assert_eq!(s.app.vm.node(ix).lane, Lane::Running);
        }
        s.finish().await;
    }

    /// An orchestrator that asks three times for a role the catalog does
    /// not have (the same request), then, in its result, for a reviewer
    /// with a request that is not valid.
    const DROPS: &str = include_str!("../plays/ledger_drops.toml");

    #[tokio::test(start_paused = true)]
    async fn a_dropped_request_shows_what_it_asked_and_repeats_fold_into_one_row() {
        let mut s = Scene::at(&play(DROPS), 2.0, 140, 40, None).await.unwrap();
        // The ledger, newest first: the invalid request, then the three
        // identical drops folded into one row.
        let t = text(&s.render());
        assert!(
            t.contains("✗ ×3 requester_not_"),
            "a folded row says how many it stands for: {t}"
        );
        s.press(&keys("tab tab down enter")).await;
        let t = text(&s.render());
        insta::assert_snapshot!("ledger_dropped_detail", t);
        for want in [
            "Spawn request · dropped (requester_not_authorized)",
            "repeated    ×3 — this drop and 2 more right after it",
            "emitter     kickoff (orchestrator)",
            "assignee    astronaut",
            "operation   chat",
            "why         the plan needs it",
            "  Land the rocket",
            "  then report back",
            "became      nothing: no operation was made of it",
        ] {
            assert!(t.contains(want), "{want:?} in {t}");
        }
        // A request that could not be read still shows what it said.
        s.press(&keys("esc up enter")).await;
        let t = text(&s.render());
        assert!(t.contains("dropped (builder_error)"), "{t}");
        assert!(t.contains("why         numbers"), "{t}");
        assert!(t.contains("(none that could be read)"), "{t}");
        // The log carries it, so a replay or report reads the same.
        let log = s.log();
        let asked: Vec<_> = log
            .iter()
            .filter_map(|sig| match &sig.kind {
                SignalKind::SpawnDropped { request, .. } => request.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(
            asked.len(),
            4,
            "every drop carries its request, repeats too (the ledger folds them, the log does not)"
        );
        assert_eq!(
            asked[0].instruction.as_deref(),
            Some("Land the rocket\nthen report back")
        );
        let report = playdeck::store::report::Report::from_signals(&log);
        assert_eq!(
            report.dropped_spawns["requester_not_authorized"][0].count,
            3
        );
        assert!(
            report
                .to_markdown()
                .contains("### requester_not_authorized (3)"),
            "{}",
            report.to_markdown()
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn palette_entries_open_into_their_detail() {
        let mut s = demo(30.0, 120, 36).await;
        s.press(&keys("i")).await;
        let t = text(&s.render());
        // The cursor and the branch markers are different glyphs.
        assert!(t.contains("» ▾ Initial roles (10)"), "{t}");
        assert!(t.contains("▸ palette_budget_exhausted (1)"), "{t}");
        // G reaches the last row, g the first.
        s.press(&keys("G")).await;
        let t = text(&s.render());
        assert!(
            t.lines()
                .any(|l| l.contains("»   ▸ unknown_catalog_role (1)")),
            "{t}"
        );
        s.press(&keys("enter down enter")).await;
        let t = text(&s.render());
        assert!(t.contains("Refused: astrologer"), "{t}");
        assert!(t.contains("no catalog role \"astrologer\""), "{t}");
        s.press(&keys("esc g down enter")).await;
        insta::assert_snapshot!("palette_role_detail", text(&s.render()));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn g_and_shift_g_move_every_list_and_window() {
        let mut s = demo(30.0, 120, 36).await;
        // The budgets pane has more than it shows: End shows its last
        // line, not an empty pane.
        s.press(&keys("tab G")).await;
        let b = s.app.budgets;
        assert!(b.len() > b.height(), "the pane is longer than its window");
        assert_eq!(b.visible().end, b.len());
        assert!(!b.visible().is_empty());
        let t = text(&s.render());
        assert!(t.contains("palette_budget_exhausted"), "{t}");
        s.press(&keys("up")).await;
        assert_eq!(
            s.app.budgets.visible().end,
            b.len() - 1,
            "and moves back at once"
        );
        // The capacity pane at 80×24, where it is short of room.
        let mut c = demo(30.0, 80, 24).await;
        c.press(&keys("tab tab tab G")).await;
        let cap = c.app.capacity;
        assert_eq!(cap.visible().end, cap.len());
        assert!(!cap.is_empty() && !cap.visible().is_empty());
        c.finish().await;
        // Help: the bottom, then the top.
        s.press(&keys("? G")).await;
        let h = s.app.overlay().and_then(|o| o.scroll()).copied().unwrap();
        assert!(h.offset() > 0 && h.more_below() == 0);
        s.press(&keys("g")).await;
        let h = s.app.overlay().and_then(|o| o.scroll()).copied().unwrap();
        assert_eq!(h.offset(), 0);
        // A lane.
        s.press(&keys("esc esc G")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("retro"));
        s.press(&keys("g")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("smoke-prod"));
        s.finish().await;
    }

    const JOIN: &str = r#"
[play]
name = "join"
max_concurrent = 20
[palette]
roles = [{ role = "implementer" }, { role = "tester" }]
[[operations]]
id = "broken"
role = "tester"
instruction = "fails"
independent_root = true
sim = { duration_ms = 100, outcome = "fail", error = "assertion failed: left == right" }
"#;

    fn join_play() -> Play {
        let mut text = JOIN.to_string();
        let mut deps = Vec::new();
        for i in 0..12 {
            text.push_str(&format!(
                "[[operations]]\nid = \"shard-{i:02}\"\nrole = \"implementer\"\ninstruction = \"x\"\nindependent_root = true\nsim = {{ duration_ms = 100 }}\n"
            ));
            deps.push(format!("\"shard-{i:02}\""));
        }
        text.push_str(&format!(
            "[[operations]]\nid = \"join\"\nrole = \"implementer\"\ninstruction = \"x\"\ndepends_on = [{}]\nsim = {{ duration_ms = 60000 }}\n",
            deps.join(", ")
        ));
        play(&text)
    }

    #[tokio::test(start_paused = true)]
    async fn the_inspector_puts_the_error_first_and_collapses_long_lists() {
        let mut s = Scene::at(&join_play(), 2.0, 120, 36, None).await.unwrap();
        select(&mut s, "broken");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        let first = t
            .lines()
            .find(|l| l.contains("║ ") && !l.contains("╔"))
            .unwrap_or("");
        assert!(
            first.contains("error  (simulated)") || first.contains("error"),
            "{t}"
        );
        let error_at = t.find("assertion failed").unwrap();
        let id_at = t.find("op id").unwrap();
        assert!(error_at < id_at, "the error comes first: {t}");
        s.press(&keys("esc")).await;
        select(&mut s, "join");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(t.contains("12 operations: shard-00"), "{t}");
        assert!(t.contains("… 4 more dependencies (space shows all)"), "{t}");
        assert!(!t.contains("shard-11"), "{t}");
        assert!(t.contains("space show all"), "the footer offers it: {t}");
        s.press(&keys("space")).await;
        let t = text(&s.render());
        assert!(
            t.contains("shard-11") && !t.contains("4 more dependencies"),
            "{t}"
        );
        s.finish().await;
    }

    /// Issue 13 (ADR-0033 sequential authoring): the inspector says how an
    /// operation without `depends_on` was placed.
    #[tokio::test(start_paused = true)]
    async fn rule_a33_12_the_inspector_shows_how_an_operation_was_placed() {
        let text_play = include_str!("../plays/placements.toml");
        let mut s = Scene::at(&play(text_play), 1.0, 120, 36, None)
            .await
            .unwrap();
        for (name, want) in [
            ("plan", Some("root (the first operation)")),
            ("lint", Some("root (independent_root)")),
            (
                "build",
                Some("after the operations above it (sequential authoring"),
            ),
            ("ship", None),
        ] {
            select(&mut s, name);
            s.press(&keys("enter")).await;
            let t = text(&s.render());
            match want {
                Some(w) => assert!(t.contains(&format!("placed      {w}")), "{name}: {t}"),
                None => assert!(!t.contains("placed  "), "{name}: {t}"),
            }
            s.press(&keys("esc")).await;
        }
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn operation_keys_work_inside_the_inspector() {
        let mut s = demo(30.0, 120, 36).await;
        select(&mut s, "integration-tests");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(t.contains("R retry"), "the footer offers retry here: {t}");
        s.press(&keys("R")).await;
        assert_eq!(status(&s), "retrying integration-tests");
        s.press(&keys("esc")).await;
        select(&mut s, "smoke-prod");
        s.press(&keys("enter o")).await;
        assert_eq!(status(&s), "holding smoke-prod");
        assert!(s.app.vm.by_name("smoke-prod").unwrap().held);
        let t = text(&s.render());
        assert!(t.contains("o unhold"), "{t}");
        // Issue 42: who held it, and when.
        assert!(
            t.contains("held by console (") && t.contains("at 30.0s (0.0s ago)"),
            "{t}"
        );
        s.press(&keys("esc")).await;
        select(&mut s, "deploy-prod");
        s.press(&keys("enter a")).await;
        assert_eq!(status(&s), "approved deploy-prod");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn lanes_fold_widen_zoom_and_cut_names_keeping_what_differs() {
        let mut text_play = String::from(
            "[play]\nname = \"wide\"\nmax_concurrent = 1\n[palette]\nroles = [{ role = \"implementer\" }]\n",
        );
        // What tells them apart is in the middle: `alpha`, `beta`…
        for (i, region) in ["alpha", "beta", "gamma", "delta"]
            .iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            text_play.push_str(&format!(
                "[[operations]]\nid = \"verify-svc-{region}-{i:02}-region-south-rollout\"\nrole = \"implementer\"\ninstruction = \"x\"\nindependent_root = true\nsim = {{ duration_ms = 60000 }}\n"
            ));
        }
        let p = play(&text_play);
        let mut s = Scene::at(&p, 0.0, 120, 36, None).await.unwrap();
        s.wait(1.0).await;
        let t = text(&s.render());
        // 39 queued behind one running: the cursor's place, and how many
        // hide below in a lane without it.
        assert!(t.contains("[1/39]"), "{t}");
        // The queued lane holds more than it shows: it is the widest; the
        // empty ones fold to their titles.
        let cols = s.app.geometry.lane_cols;
        assert!(cols[0].width > cols[1].width, "{cols:?}");
        // Short of room for every whole name, they fold to their short
        // titles.
        assert_eq!(cols[3].width, 8, "paused, empty, folds: {cols:?}");
        assert_eq!(cols[7].width, 0, "no skipped column without a skip");
        assert!(t.contains("┌paus 0┐"), "{t}");
        // Widened, it shows whole names.
        assert!(
            t.contains("┃ verify-svc-gamma-02-region-south-rollout"),
            "{t}"
        );
        s.press(&keys("G")).await;
        let t = text(&s.render());
        assert!(t.contains("[39/39]") && t.contains("-39-"), "{t}");
        // z: the queued lane alone, at full width, whole names and all.
        s.press(&keys("z")).await;
        let t = text(&s.render());
        assert_eq!(s.app.geometry.lane_cols[0].width, 120, "{t}");
        assert!(
            t.contains("verify-svc-delta-39-region-south-rollout"),
            "{t}"
        );
        let top = t.lines().nth(2).unwrap();
        assert!(
            top.contains("queued 39") && top.contains("z: every lane") && !top.contains("running"),
            "the other lanes give way: {t}"
        );
        // The next lane takes the zoom with it; z again shows every lane.
        s.press(&keys("l")).await;
        assert_eq!(s.app.geometry.lane_cols[1].width, 120);
        s.press(&keys("z")).await;
        assert!(text(&s.render()).contains("queued 39"));
        s.finish().await;
        // At 80×24 a lane that cannot show all says how many more there are.
        let mut s = Scene::at(&p, 1.0, 80, 24, None).await.unwrap();
        let t = text(&s.render());
        // Longer than the lane, names are cut where the rows repeat each
        // other: the region that differs stays on every row.
        let queued: Vec<&str> = t
            .lines()
            .skip(3)
            .take(4)
            .map(|l| l.split('┃').nth(1).unwrap_or(""))
            .collect();
        for (row, region) in queued.iter().zip(["beta", "gamma", "delta", "alpha"]) {
            assert!(row.contains(region), "{row:?} keeps {region}: {t}");
        }
        // The cursor's lane is read first; the queue folds, and still
        // says how many it does not show.
        s.press(&keys("l")).await;
        let t = text(&s.render());
        assert!(t.contains("+29 ┘"), "{t}");
        s.finish().await;
    }

    /// A fleet's day: many gates, failures told apart by a service id in
    /// the middle of their names, and far more finished work than either.
    pub(super) fn fleet() -> Play {
        let mut p = String::from(
            "[play]\nname = \"fleet\"\nmax_concurrent = 40\n[palette]\nroles = [{ role = \"implementer\" }, { role = \"tester\" }, { role = \"reviewer\" }]\n",
        );
        for svc in ["billing", "search", "auth", "ledger", "orders"] {
            for region in ["eu-west", "us-east", "ap-south", "us-west"] {
                for k in 1..=6 {
                    let fail = if k == 3 && svc.len() > 5 {
                        ", outcome = \"fail\", error = \"smoke check failed\""
                    } else {
                        ""
                    };
                    p.push_str(&format!(
                        "[[operations]]\nid = \"migrate-{svc}-{region}-{k:02}\"\nrole = \"implementer\"\ninstruction = \"x\"\nindependent_root = true\nsim = {{ duration_ms = {} }}\n[[operations]]\nid = \"verify-{svc}-{region}-{k:02}\"\nrole = \"tester\"\ninstruction = \"x\"\ndepends_on = [\"migrate-{svc}-{region}-{k:02}\"]\nsim = {{ duration_ms = 300{fail} }}\n",
                        200 + k * 50
                    ));
                }
                p.push_str(&format!(
                    "[[operations]]\nid = \"cutover-{svc}-{region}\"\nrole = \"reviewer\"\ninstruction = \"x\"\ndepends_on = [\"verify-{svc}-{region}-01\"]\napproval = true\nsim = {{ duration_ms = 100 }}\n"
                ));
            }
        }
        play(&p)
    }

    /// Issue 42: lanes are sized by what must be read. The gates and the
    /// failures read whole with their times beside far more finished work;
    /// at 80×24 the console opens on them.
    #[tokio::test(start_paused = true)]
    async fn the_lanes_acted_on_read_whole_beside_finished_work() {
        let p = fleet();
        for (w, h) in [(200, 50), (120, 36)] {
            let mut s = Scene::at(&p, 20.0, w, h, None).await.unwrap();
            let t = text(&s.render());
            assert!(s.app.vm.approvals_waiting() >= 10, "{t}");
            assert!(s.app.vm.counts.failed >= 4, "{t}");
            let col = |lane| s.app.geometry.lane_cols[playdeck::operator::model::lane_index(lane)];
            let (appr, failed) = (col(Lane::AwaitingApproval), col(Lane::Failed));
            // Every visible gate: its whole name and how long it has waited.
            let buf = s.render();
            for row in 1..appr.height - 1 {
                let cells: String = (appr.x + 1..appr.x + appr.width - 1)
                    .map(|x| buf[(x, appr.y + row)].symbol().to_string())
                    .collect();
                let name = cells.split_whitespace().next().unwrap_or("");
                if name.starts_with("cutover-") {
                    assert!(
                        !name.contains('…') && cells.trim_end().ends_with('s'),
                        "{w}×{h}: {cells:?}\n{t}"
                    );
                }
            }
            // Failures: whole names, the service id that differs kept.
            assert!(t.contains("verify-search-eu-west-03"), "{w}×{h}: {t}");
            assert!(failed.width >= 24 + 3, "{w}×{h}: {failed:?}");
            s.finish().await;
        }
        let mut s = Scene::at(&p, 20.0, 80, 24, None).await.unwrap();
        let t = text(&s.render());
        assert_eq!(
            s.app.lane_col,
            playdeck::operator::model::lane_index(Lane::AwaitingApproval),
            "80×24 opens on the gates: {t}"
        );
        assert!(t.contains("cutover-billing-eu-west"), "{t}");
        s.finish().await;
    }

    /// Issue 42: every gate shown marked at once (the filter applies),
    /// a confirmation that scrolls through every name, one line for all.
    #[tokio::test(start_paused = true)]
    async fn every_shown_gate_is_marked_at_once_and_approved_in_one_line() {
        let mut s = Scene::at(&fleet(), 20.0, 80, 24, None).await.unwrap();
        let waiting = s.app.vm.approvals_waiting();
        assert_eq!(waiting, 20);
        s.press(&keys("/ s e a r c h enter *")).await;
        assert_eq!(s.app.marks.len(), 4, "the filter applies");
        s.press(&keys("* esc *")).await;
        assert_eq!(s.app.marks.len(), 20, "{}", status(&s));
        s.press(&keys("a")).await;
        let t = text(&s.render());
        assert!(t.contains("Approve these 20 operations?"), "{t}");
        assert!(
            t.contains("more (j, pgdn)") && !t.contains("and 8 more"),
            "{t}"
        );
        let last = "cutover-orders-us-west";
        assert!(!t.contains(last), "{t}");
        s.press(&keys("G")).await;
        let t = text(&s.render());
        assert!(
            t.contains(last) && t.contains("more (k, pgup)"),
            "scrolled to the end: {t}"
        );
        s.press(&keys("y")).await;
        let st = status(&s);
        assert!(
            st.starts_with("approved 20: cutover-billing-eu-west, "),
            "{st}"
        );
        assert!(st.ends_with(last), "{st}");
        assert_eq!(s.app.vm.approvals_waiting(), 0);
        s.finish().await;
    }

    /// Issue 42: an attached console that has not yet folded what the run
    /// said before it came says so, and its acting keys wait.
    #[tokio::test(start_paused = true)]
    async fn a_console_catching_up_says_so_and_its_acting_keys_wait() {
        let mut s = demo(1.0, 160, 48).await;
        let now = s.app.vm.seq;
        s.app.catch_up_to = Some(now + 3);
        let t = text(&s.render());
        let top = t.lines().next().unwrap();
        assert!(
            top.contains(&format!("⟳ catching up ({now} of {} events)", now + 3)),
            "{top}"
        );
        s.press(&keys("p")).await;
        assert!(
            status(&s).starts_with(&format!(
                "catching up with the run ({now} of {} events): pause acts once",
                now + 3
            )),
            "{}",
            status(&s)
        );
        assert!(!s.app.vm.run.paused);
        s.wait(2.0).await;
        assert!(s.app.vm.seq >= now + 3);
        let t = text(&s.render());
        assert!(!t.lines().next().unwrap().contains("catching up"), "{t}");
        s.press(&keys("p")).await;
        assert!(s.app.vm.run.paused, "{}", status(&s));
        s.finish().await;
    }

    /// Every width from 80 to 200 columns draws, with and without a
    /// filter, with lanes folded, tagged and cut (a title's arithmetic once
    /// underflowed at a folded width under a filter).
    #[tokio::test(start_paused = true)]
    async fn every_width_draws_with_and_without_a_filter() {
        let mut s = demo(30.0, 80, 24).await;
        for filter in ["", "e", "zzz-none"] {
            s.app.filter = filter.to_string();
            for w in 80..=200 {
                s.resize(w, 36);
                let t = text(&s.render());
                assert!(t.contains("playdeck"), "{w}: {t}");
            }
        }
        s.finish().await;
    }

    /// Issue 42: a dialog wider than the screen wraps; the command it
    /// offers to copy is whole.
    #[tokio::test(start_paused = true)]
    async fn dialogs_wrap_instead_of_cutting() {
        let mut s = demo(30.0, 80, 24).await;
        select(&mut s, "retro");
        s.press(&keys("a")).await;
        let t = text(&s.render());
        let inside: Vec<String> = t
            .lines()
            .filter_map(|l| {
                let a = l.find('║')?;
                let b = l.rfind('║')?;
                (b > a).then(|| l[a + '║'.len_utf8()..b].trim().to_string())
            })
            .collect();
        let said = inside.join(" ");
        assert!(
            said.contains("From a script: playdeck ctl demo approve deploy-prod"),
            "{t}"
        );
        assert!(!said.contains('…'), "nothing cut: {t}");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn at_80x24_state_approvals_and_help_stay_visible() {
        let mut s = demo(30.0, 80, 24).await;
        let t = text(&s.render());
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains("● running") && lines[0].contains("⚑ 1"),
            "{t}"
        );
        let footer = lines[lines.len() - 2];
        assert!(
            footer.contains("? help") && footer.contains("q/ctrl-c quit"),
            "{footer}"
        );
        // Empty lanes fold but keep a title that says which lane they are.
        assert!(t.contains("run 0") && t.contains("paus 0"), "{t}");
        insta::assert_snapshot!("compact_with_approval", t);
        s.finish().await;
    }

    fn warnings_play() -> Play {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("screenshots/plays/warnings.toml");
        Play::load(&path).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn warnings_are_counted_in_the_header_and_all_listed() {
        let mut s = Scene::at(&warnings_play(), 3.0, 120, 36, None)
            .await
            .unwrap();
        let t = text(&s.render());
        assert!(
            t.lines().next().unwrap().contains("⚠ 3 warnings (w)"),
            "{t}"
        );
        assert!(t.contains("w warnings"), "the footer offers them: {t}");
        s.press(&keys("w")).await;
        let t = text(&s.render());
        insta::assert_snapshot!("warnings_overlay", t);
        assert!(t.contains("Warnings (3), newest first"), "{t}");
        assert!(t.contains("\"phone\"") && t.contains("\"rehearse\""), "{t}");
        assert!(t.contains("legacy roster"), "{t}");
        s.finish().await;
        // None: nothing to open, and the footer does not offer it.
        let mut s = demo(3.0, 120, 36).await;
        assert!(!text(&s.render()).contains("w warnings"));
        s.press(&keys("w")).await;
        assert_eq!(status(&s), "the run has no warnings");
        s.finish().await;
    }

    /// A warning repeated 300 times is one row with its count and its
    /// first and last time; another operation's is another row; the header
    /// counts distinct warnings and says the total (issue 25).
    #[tokio::test(start_paused = true)]
    async fn repeated_warnings_fold_into_one_row_with_their_count() {
        let mut s = Scene::at(&warnings_play(), 3.0, 120, 36, None)
            .await
            .unwrap();
        let limited = "plan: provider rate-limited the request; retrying in 30s";
        for _ in 0..150 {
            s.session.handle.warn(limited.into());
        }
        s.wait(2.0).await;
        for _ in 0..150 {
            s.session.handle.warn(limited.into());
        }
        s.session
            .handle
            .warn("migrate: provider rate-limited the request; retrying in 30s".into());
        s.wait(0.5).await;
        let t = text(&s.render());
        assert!(
            t.lines()
                .next()
                .unwrap()
                .contains("⚠ 5 warnings, 304 in all (w)"),
            "{t}"
        );
        s.press(&keys("w")).await;
        let t = text(&s.render());
        insta::assert_snapshot!("warnings_overlay_folded", t);
        assert!(t.contains("Warnings (5, 304 in all), newest first"), "{t}");
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| l.contains('║') && l.contains("rate-limited"))
            .collect();
        assert_eq!(rows.len(), 2, "one row each operation: {t}");
        // The one seen last first; the repeated one with its count and
        // the span of time it came in.
        assert!(
            rows[0].contains("5.0s ") && rows[0].contains("migrate:"),
            "{t}"
        );
        assert!(!rows[0].contains('×'), "{t}");
        assert!(
            rows[1].contains("3.0s … 5.0s ×300  plan: provider rate-limited"),
            "{t}"
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn help_shows_the_keys_of_what_is_on_screen_only() {
        // Tall enough for every key of the console's help.
        let mut s = demo(30.0, 160, 72).await;
        s.press(&keys("?")).await;
        let live = text(&s.render());
        assert!(live.contains("Keys · the console"), "{live}");
        assert!(live.contains("pause (running work finishes"), "{live}");
        assert!(!live.contains("one event back"), "no replay keys: {live}");
        // What the screen beneath refuses now is dimmed: the run is not
        // paused, so resume and step are; pause is not.
        let buf = s.render();
        let dim = s.app.theme().dim;
        let fg_of = |needle: &str| {
            let rows = text(&buf);
            let (y, row) = rows
                .lines()
                .enumerate()
                .find(|(_, r)| r.contains(needle))
                .unwrap_or_else(|| panic!("{needle} in {rows}"));
            let x = row[..row.find(needle).unwrap()].chars().count();
            buf[(x as u16, y as u16)].fg
        };
        assert_eq!(fg_of("resume  "), dim);
        assert_eq!(fg_of("step: start the selected"), dim);
        assert_ne!(fg_of("pause (running work finishes"), dim);
        // Sized to its content: the window ends where its lines do.
        let h = s.app.overlay().and_then(|o| o.scroll()).copied().unwrap();
        assert_eq!(h.more_below(), 0, "all of it fits at 160×72");
        s.press(&keys("esc")).await;
        select(&mut s, "deploy-prod");
        s.press(&keys("enter ?")).await;
        let inspector = text(&s.render());
        assert!(
            inspector.contains("Keys · the node inspector"),
            "{inspector}"
        );
        assert!(
            inspector.contains("approve the selected gate"),
            "{inspector}"
        );
        assert!(!inspector.contains("pause (running"), "{inspector}");
        // Closing help goes back to the inspector.
        s.press(&keys("esc")).await;
        assert!(matches!(s.app.overlay(), Some(Overlay::Inspector { .. })));
        s.finish().await;
    }

    /// Issue 42: the agents have spent max_spawn (5 of 5 at 30 s of the
    /// demo); the operator's own add is still taken, and spends none of it.
    #[tokio::test(start_paused = true)]
    async fn the_operators_add_does_not_spend_the_agents_spawn_budget() {
        let mut s = demo(30.0, 120, 36).await;
        let spent = |s: &Scene| {
            let b = s.app.vm.palette.budgets.as_ref().unwrap();
            (b.spawns_accepted, b.max_spawn)
        };
        assert_eq!(spent(&s), (5, 5), "the agents' budget is spent");
        select(&mut s, "retro");
        s.press(&keys("A")).await;
        type_text(&mut s, "tester").await;
        s.press(&keys("tab")).await;
        type_text(&mut s, "Check the rollback once more").await;
        s.press(&keys("enter")).await;
        let st = status(&s);
        assert!(st.starts_with("added "), "{st}");
        assert_eq!(spent(&s), (5, 5), "still 5 of 5");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_add_form_adds_work_after_the_selected_operation() {
        let mut s = demo(12.0, 120, 36).await;
        select(&mut s, "impl-schema");
        s.press(&keys("A")).await;
        match s.app.overlay() {
            Some(Overlay::Add(f)) => {
                assert_eq!(f.fields[0], "impl-schema", "after is the selection");
                assert_eq!(f.focus, 1, "the role is asked next");
            }
            _ => panic!("A opens the add form"),
        }
        type_text(&mut s, "tester").await;
        s.press(&keys("tab")).await;
        type_text(&mut s, "Check the migration rolls back").await;
        insta::assert_snapshot!("add_form", text(&s.render()));
        s.press(&keys("enter")).await;
        let st = status(&s);
        assert!(st.starts_with("added spawn-"), "{st}");
        let name = st.trim_start_matches("added ");
        let n = s
            .app
            .vm
            .by_name(name)
            .expect("the new operation is in the view");
        assert_eq!(n.role().map(|r| &**r), Some("tester"));
        let after = s.app.vm.by_name("impl-schema").unwrap().op.op_id;
        assert!(n.depends_on.contains(&after), "it waits for impl-schema");
        // The ledger has it, from the operator.
        let t = text(&s.render());
        assert!(t.contains("(operator) → tester"), "{t}");
        // A role the run does not have is refused in the form (issue 20):
        // it stays open with what was typed, on the role, saying which
        // roles there are.
        s.press(&keys("A")).await;
        type_text(&mut s, "astrologer").await;
        s.press(&keys("tab")).await;
        type_text(&mut s, "read the stars").await;
        s.press(&keys("enter")).await;
        match s.app.overlay() {
            Some(Overlay::Add(f)) => {
                assert_eq!(f.fields[1], "astrologer");
                assert_eq!(f.fields[2], "read the stars");
                assert_eq!(f.focus, 1, "back on the role");
                let e = f.error.as_deref().unwrap();
                assert!(
                    e.starts_with("\"astrologer\" is not a role of this run; roles: "),
                    "{e}"
                );
                assert!(e.contains("tester"), "{e}");
            }
            _ => panic!("the form stays open"),
        }
        let t = text(&s.render());
        assert!(t.contains("is not a role of this run"), "{t}");
        // A name that is not a name, the same way.
        for _ in 0.."astrologer".len() {
            s.press(&keys("backspace")).await;
        }
        type_text(&mut s, "tester").await;
        s.press(&keys("tab tab")).await;
        type_text(&mut s, "检查").await;
        s.press(&keys("enter")).await;
        match s.app.overlay() {
            Some(Overlay::Add(f)) => {
                assert_eq!(f.focus, 3, "on the name");
                let e = f.error.as_deref().unwrap();
                assert!(
                    e.starts_with("\"检查\" is not a name for a new operation"),
                    "{e}"
                );
                assert_eq!(f.fields[1], "tester", "the input is kept");
            }
            _ => panic!("the form stays open"),
        }
        s.press(&keys("esc")).await;
        assert!(s.app.overlays.is_empty());
        // What a script sends through ctl still meets the run's own check,
        // and its ledger row keeps what the operator asked for.
        let _ = s
            .session
            .handle
            .request(playdeck::kernel::Request::Add {
                after: vec![],
                role: Some("astrologer".into()),
                instruction: Some("read the stars".into()),
                name: None,
            })
            .await;
        s.wait(0.01).await;
        let (row, e) = s
            .app
            .vm
            .ledger
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| e.assignee.as_deref() == Some("astrologer"))
            .expect("a ledger row for the refused add");
        assert_eq!(e.emitter_id, None, "from the operator");
        s.app.overlays.push(Overlay::LedgerRow {
            row,
            scroll: playdeck::console::scroll::ScrollList::text(),
        });
        let t = text(&s.render());
        assert!(t.contains("emitter     the operator"), "{t}");
        assert!(t.contains("  read the stars"), "{t}");
        s.finish().await;
    }
}

mod status {
    use super::*;
    use playdeck::console::replay::Timeline;

    fn counts(s: &Scene) -> playdeck::kernel::signal::LaneCounts {
        s.app.vm.counts.clone()
    }

    /// `n` and `N` go through what needs the operator, oldest first, and
    /// say each one's first line; what was skipped by design is not among
    /// them.
    #[tokio::test(start_paused = true)]
    async fn n_goes_to_each_problem_in_turn_with_its_first_line() {
        let mut s = Scene::at(&play(FAILS), 5.0, 120, 36, None).await.unwrap();
        // The escalation (at 0.5 s) came before the failure (at 0.6 s).
        s.press(&keys("n")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("security-review"));
        assert_eq!(
            status(&s),
            "1/2 · security-review escalated: tokens in debug logs"
        );
        s.press(&keys("n")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("integration-tests"));
        assert_eq!(
            status(&s),
            "2/2 · integration-tests failed: 2 of 48 integration tests failed: checkout times out"
        );
        // Round again, and back.
        s.press(&keys("n")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("security-review"));
        s.press(&keys("N")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("integration-tests"));
        s.finish().await;
    }

    /// `P` lists every problem with its first line; enter goes to one, and
    /// the operation keys act on the row under the cursor.
    #[tokio::test(start_paused = true)]
    async fn the_problems_list_shows_why_and_acts_on_its_rows() {
        let mut s = Scene::at(&fails_held_open(), 5.0, 140, 40, None)
            .await
            .unwrap();
        s.press(&keys("P")).await;
        let t = text(&s.render());
        assert!(t.contains("Problems (3), oldest first"), "{t}");
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| {
                l.contains('║') && (l.contains(" ⚑ ") || l.contains(" ! ") || l.contains(" ✗ "))
            })
            .collect();
        assert_eq!(rows.len(), 3, "{t}");
        // Oldest first: the gate (0.0 s), the escalation, the failure; the
        // skipped ones are not problems.
        assert!(
            rows[0].contains("gate") && rows[0].contains("waiting"),
            "{t}"
        );
        assert!(
            rows[1].contains("security-review") && rows[1].contains("tokens in debug logs"),
            "{t}"
        );
        assert!(
            rows[2].contains("integration-tests")
                && rows[2].contains("2 of 48 integration tests failed: checkout times out"),
            "{t}"
        );
        assert!(
            !rows.iter().any(|r| r.contains("load-tests")),
            "skipped is no problem: {t}"
        );
        insta::assert_snapshot!("problems_list", t);
        // The keys act on the row under the cursor: approve the gate from
        // the list, and it leaves it.
        s.press(&keys("a")).await;
        s.wait(0.5).await;
        assert_eq!(status(&s), "approved gate");
        let t = text(&s.render());
        assert!(t.contains("Problems (2)"), "the list is current: {t}");
        // enter goes to the failure in its lane.
        s.press(&keys("j enter")).await;
        assert!(s.app.overlays.is_empty());
        assert_eq!(selected_name(&s).as_deref(), Some("integration-tests"));
        s.finish().await;
    }

    /// The status line lets a message go after a while; M keeps them all.
    #[tokio::test(start_paused = true)]
    async fn the_status_line_expires_and_the_message_log_keeps_it() {
        let mut s = Scene::at(&play(FAILS), 5.0, 120, 36, None).await.unwrap();
        s.press(&keys("n")).await;
        s.press(&keys("n")).await;
        let footer = |s: &mut Scene| {
            let t = text(&s.render());
            t.lines().last().unwrap().to_string()
        };
        assert!(footer(&mut s).contains("2/2 · integration-tests failed"));
        s.wait(3.0).await;
        assert!(
            footer(&mut s).contains("2/2 · integration-tests failed"),
            "still fresh"
        );
        s.wait(6.0).await;
        assert!(
            !footer(&mut s).contains("integration-tests failed"),
            "gone after 8 s"
        );
        s.press(&keys("M")).await;
        let t = text(&s.render());
        assert!(t.contains("Messages (2), newest first"), "{t}");
        let first = t.find("2/2 · integration-tests failed").expect("kept");
        let second = t.find("1/2 · security-review escalated").expect("kept");
        assert!(first < second, "newest first: {t}");
        s.finish().await;
    }

    /// Spawned work reads as what it does, with its number; the filter
    /// finds it by those words, the inspector gives the name commands take.
    #[tokio::test(start_paused = true)]
    async fn spawned_work_is_named_by_its_instruction() {
        let mut s = demo(30.0, 160, 40).await;
        let t = text(&s.render());
        assert!(!t.contains("↳spawn-3"), "{t}");
        assert!(t.contains("↳benchmark the refund path with #3"), "{t}");
        s.press(&keys("/ b e n c h m a r k enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("#3") && !t.contains("#2"),
            "the filter finds it by its words: {t}"
        );
        select(&mut s, "spawn-3");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("benchmark the refund path with #3 · spawn-3"),
            "{t}"
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn skipped_are_counted_apart_and_a_failure_names_its_cause() {
        let mut s = Scene::at(&play(FAILS), 5.0, 120, 36, None).await.unwrap();
        let t = text(&s.render());
        let header: Vec<&str> = t.lines().take(2).collect();
        assert!(
            header[0].contains(
                "● finished: failed — 1 failed: integration-tests · 1 escalated: security-review"
            ),
            "{t}"
        );
        assert!(
            header[1].contains("failed 1") && header[1].contains("skipped 2"),
            "{t}"
        );
        // Skipped ones have their own column, not the red failed lane.
        assert!(
            t.contains("┌ failed 1 ") && t.contains("┌ skipped 2 "),
            "the lane titles too: {t}"
        );
        // One source: the report counts the same.
        let report = playdeck::store::report::Report::from_signals(&s.log());
        assert_eq!(report.lanes["skipped"], 2);
        assert_eq!(report.lanes["failed"], 1);
        assert_eq!(counts(&s).skipped, 2);
        // And names the same cause, as ctl status and the exit line do.
        let cause = "1 failed: integration-tests · 1 escalated: security-review";
        assert_eq!(report.cause.as_deref(), Some(cause));
        assert!(
            report
                .to_markdown()
                .contains(&format!("**Outcome:** failed — {cause} after")),
            "{}",
            report.to_markdown()
        );
        let ctl = playdeck::control::status(&s.session.handle, None)
            .await
            .unwrap();
        assert_eq!(ctl.cause.as_deref(), Some(cause));
        let line = playdeck::console::run::exit_line(
            &s.app,
            Outcome::Failed,
            playdeck::console::run::Ended::Quit,
        );
        assert!(line.contains(&format!("failed — {cause};")), "{line}");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_reopens_what_it_skipped_at_once_everywhere() {
        let mut s = Scene::at(&fails_held_open(), 3.0, 120, 36, None)
            .await
            .unwrap();
        assert_eq!(counts(&s).skipped, 2);
        select(&mut s, "integration-tests");
        s.press(&keys("R")).await;
        // Right after the retry, before the new attempt ends.
        let c = counts(&s);
        assert_eq!((c.skipped, c.failed), (0, 0), "{c:?}");
        let t = text(&s.render());
        // Zero counts leave the header first.
        assert!(!t.lines().nth(1).unwrap().contains("skipped"), "{t}");
        let ctl = playdeck::control::status(&s.session.handle, None)
            .await
            .unwrap();
        assert_eq!(ctl.lanes, c, "ctl status agrees");
        let log = s.log();
        let replayed = Timeline::new(log.clone(), s.app.vm.facts.clone());
        assert_eq!(replayed.state_at(replayed.len()).counts, c, "replay agrees");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn resume_with_retry_agrees_in_header_replay_and_ctl_status() {
        let p = play(FAILS);
        let runs = tempfile::tempdir().unwrap();
        let run_dir = runs.path().join("run");
        let first = SessionOptions {
            run_dir: Some(run_dir.clone()),
            run_id: Some("fails".into()),
            control: false,
            ..SessionOptions::default()
        };
        let s = Scene::with(&p, first, tempfile::tempdir().unwrap(), 5.0, 120, 36, None)
            .await
            .unwrap();
        assert_eq!(s.app.vm.run.finished, Some(Outcome::Failed));
        assert_eq!(counts(&s).skipped, 2);
        s.finish().await;

        let again = SessionOptions {
            resume: Some(run_dir.clone()),
            retry: vec!["integration-tests".into()],
            control: false,
            ..SessionOptions::default()
        };
        let mut s = Scene::with(&p, again, tempfile::tempdir().unwrap(), 0.0, 120, 36, None)
            .await
            .unwrap();
        // What the retry reopened left the skipped count at once.
        let c = counts(&s);
        assert_eq!(c.skipped, 0, "{c:?}");
        assert_eq!(c.failed, 0, "{c:?}");
        let t = text(&s.render());
        assert!(t.contains("(resumed)"), "{t}");
        assert!(!t.lines().nth(1).unwrap().contains("skipped"), "{t}");
        let ctl = playdeck::control::status(&s.session.handle, None)
            .await
            .unwrap();
        assert_eq!(ctl.lanes, c, "ctl status agrees");
        let replayed = Timeline::new(s.log(), s.app.vm.facts.clone());
        assert_eq!(replayed.state_at(replayed.len()).counts, c, "replay agrees");
        // And it runs to the end this time.
        s.wait(5.0).await;
        let c = counts(&s);
        assert_eq!((c.failed, c.skipped, c.escalated), (0, 0, 1), "{c:?}");
        let replayed = Timeline::new(s.log(), s.app.vm.facts.clone());
        assert_eq!(replayed.state_at(replayed.len()).counts, c);
        let line = playdeck::console::run::exit_line(
            &s.app,
            Outcome::Failed,
            playdeck::console::run::Ended::Quit,
        );
        assert!(
            line.starts_with("playdeck: resumed run fails failed"),
            "{line}"
        );
        s.finish().await;
    }

    /// Issue 42: failures are marked too, and R retries the marked ones
    /// in one go, said in one line; `a` still approves only marked gates.
    #[tokio::test(start_paused = true)]
    async fn r_retries_every_marked_failure_in_one_line() {
        let mut s = Scene::at(&super::details::fleet(), 20.0, 120, 36, None)
            .await
            .unwrap();
        let failed: Vec<String> = s
            .app
            .vm
            .lane(Lane::Failed)
            .iter()
            .take(3)
            .map(|ix| s.app.vm.node(ix).name().to_string())
            .collect();
        for f in &failed {
            select(&mut s, f);
            s.press(&keys("m")).await;
        }
        assert!(
            status(&s).ends_with("3 failures marked: R retries them"),
            "{}",
            status(&s)
        );
        let t = text(&s.render());
        assert!(
            t.contains("3 marked: R retry"),
            "the footer names them: {t}"
        );
        s.press(&keys("R")).await;
        let st = status(&s);
        assert_eq!(st, format!("retrying 3: {}", failed.join(", ")));
        for f in &failed {
            assert_ne!(s.app.vm.by_name(f).unwrap().lane, Lane::Failed, "{f}");
        }
        assert!(s.app.marks.is_empty());
        s.finish().await;
    }

    /// Issue 42: an escalation offers acknowledge and retry. Retried, it
    /// runs again and what waited on it waits for the new attempt; once
    /// its dependants have begun on its result, the run refuses, naming
    /// them.
    #[tokio::test(start_paused = true)]
    async fn an_escalation_offers_acknowledge_and_retry() {
        let p = play(
            "[play]\nname = \"esc\"\nmax_concurrent = 1\n[palette]\nroles = [{ role = \"reviewer\" }]\n\
             [[operations]]\nid = \"review\"\nrole = \"reviewer\"\ninstruction = \"r\"\n\
             sim = { duration_ms = 100, emits = [{ at_ms = 50, escalation = { reason = \"needs a human\" } }] }\n\
             [[operations]]\nid = \"gate\"\nrole = \"reviewer\"\ninstruction = \"g\"\ndepends_on = [\"review\"]\napproval = true\nsim = { duration_ms = 100 }\n\
             [[operations]]\nid = \"after\"\nrole = \"reviewer\"\ninstruction = \"a\"\ndepends_on = [\"gate\"]\nsim = { duration_ms = 100 }\n\
             [[operations]]\nid = \"keep\"\nrole = \"reviewer\"\ninstruction = \"k\"\nindependent_root = true\napproval = true\nsim = { duration_ms = 100 }\n",
        );
        let mut s = Scene::at(&p, 1.0, 120, 36, None).await.unwrap();
        assert_eq!(s.app.vm.by_name("review").unwrap().lane, Lane::Escalated);
        select(&mut s, "review");
        let t = text(&s.render());
        assert!(
            t.contains("review: R retry  K acknowledge"),
            "the footer offers both: {t}"
        );
        // (keep, a gate of its own, holds the run open.)
        s.press(&keys("R")).await;
        assert_eq!(status(&s), "retrying review");
        assert_ne!(
            s.app.vm.by_name("gate").unwrap().lane,
            Lane::AwaitingApproval,
            "the gate waits again"
        );
        s.wait(1.0).await;
        assert_eq!(s.app.vm.by_name("review").unwrap().attempt, 2);
        assert_eq!(
            s.app.vm.by_name("gate").unwrap().lane,
            Lane::AwaitingApproval
        );
        // The gate begins on the result once approved: no retry then.
        select(&mut s, "gate");
        s.press(&keys("a")).await;
        s.wait(1.0).await;
        select(&mut s, "review");
        s.press(&keys("R")).await;
        assert!(
            status(&s).starts_with("review escalated, and gate already began on its result"),
            "{}",
            status(&s)
        );
        s.finish().await;
    }

    /// Issue 42: a problem the operator has seen to is acknowledged: `n`
    /// and the problems list pass it by and say how many they hide; `K`
    /// again brings it back. A gate cannot be: it waits for a decision.
    #[tokio::test(start_paused = true)]
    async fn problems_can_be_acknowledged_and_n_passes_them_by() {
        let mut s = Scene::at(&fails_held_open(), 5.0, 120, 36, None)
            .await
            .unwrap();
        assert_eq!(s.app.problems().len(), 3);
        select(&mut s, "integration-tests");
        let t = text(&s.render());
        assert!(t.contains("K acknowledge"), "the footer offers it: {t}");
        s.press(&keys("K")).await;
        assert!(
            status(&s).starts_with("acknowledged integration-tests"),
            "{}",
            status(&s)
        );
        select(&mut s, "security-review");
        s.press(&keys("K")).await;
        assert_eq!(s.app.problems().len(), 1);
        for _ in 0..3 {
            s.press(&keys("n")).await;
            assert_eq!(
                selected_name(&s).as_deref(),
                Some("gate"),
                "n passes them by"
            );
        }
        s.press(&keys("P")).await;
        let t = text(&s.render());
        assert!(
            t.contains("Problems (1), oldest first · 2 acknowledged, not listed"),
            "{t}"
        );
        s.press(&keys("esc")).await;
        select(&mut s, "gate");
        s.press(&keys("K")).await;
        assert!(
            status(&s).contains("only those are acknowledged"),
            "{}",
            status(&s)
        );
        select(&mut s, "integration-tests");
        s.press(&keys("K")).await;
        assert!(
            status(&s).starts_with("integration-tests is a problem again"),
            "{}",
            status(&s)
        );
        assert_eq!(s.app.problems().len(), 2);
        // Acknowledged, then retried: the acknowledgement was for the
        // attempt that failed, and goes with it.
        s.press(&keys("K R")).await;
        let ix = s
            .app
            .vm
            .ix(&s.app.vm.by_name("integration-tests").unwrap().op.op_id)
            .unwrap();
        assert!(!s.app.acknowledged.contains(&ix));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_active_filter_shows_in_the_lanes_and_clearing_keeps_the_selection() {
        let mut s = demo(30.0, 120, 36).await;
        s.press(&keys("/ r e t enter")).await;
        let t = text(&s.render());
        assert!(t.contains("queued 1 /ret"), "{t}");
        assert_eq!(selected_name(&s).as_deref(), Some("retro"));
        // Issue 42: folded lanes keep the tag; a lane whose rows the
        // filter hides says so; the footer counts what matches.
        assert!(t.contains("/run 0") || t.contains("/running 0"), "{t}");
        assert!(t.contains("no match"), "{t}");
        assert_eq!(status(&s), "filter: ret — 1 shown");
        s.press(&keys("/ x x")).await;
        let t = text(&s.render());
        assert!(
            t.contains("filter: retxx▏ — no match"),
            "as it is typed: {t}"
        );
        s.press(&keys("enter")).await;
        assert_eq!(status(&s), "filter: retxx — no match (esc clears)");
        s.press(&keys("/ backspace backspace enter")).await;
        s.press(&keys("esc")).await;
        assert!(s.app.filter.is_empty());
        assert_eq!(
            selected_name(&s).as_deref(),
            Some("retro"),
            "clearing keeps the selection"
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_footer_offers_what_applies_to_the_selection() {
        let mut s = demo(30.0, 120, 36).await;
        let footer = |s: &mut Scene| {
            let t = text(&s.render());
            let lines: Vec<&str> = t.lines().collect();
            lines[lines.len() - 2].to_string()
        };
        select(&mut s, "integration-tests");
        let f = footer(&mut s);
        // The keys for the selection come first, after its name.
        assert!(f.starts_with(" integration-tests: R retry  "), "{f}");
        // a and d decide the oldest gate from anywhere: named apart.
        assert!(
            f.contains("  deploy-prod: a approve  d deny  p pause"),
            "{f}"
        );
        select(&mut s, "deploy-prod");
        let f = footer(&mut s);
        assert!(
            f.starts_with(" deploy-prod: a approve  d deny  o hold"),
            "{f}"
        );
        assert!(!f.contains("R retry"), "{f}");
        select(&mut s, "retro");
        s.press(&keys("o")).await;
        let f = footer(&mut s);
        assert!(f.starts_with(" retro: o unhold"), "{f}");
        // a acts on what the footer named: the gate, asked about by name.
        assert!(f.contains("deploy-prod: a approve"), "{f}");
        s.press(&keys("a")).await;
        assert!(text(&s.render()).contains("Approve deploy-prod?"));
        s.press(&keys("n")).await;
        // What the footer leaves out, the key refuses with the same reason.
        s.press(&keys("R")).await;
        assert_eq!(
            status(&s),
            "retro has not failed; only failed, denied or escalated operations can be retried"
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_operation_says_so_and_the_header_says_held() {
        let p = play(include_str!("../plays/held_operation.toml"));
        let dir = tempfile::tempdir().unwrap();
        let opts = SessionOptions {
            run_dir: Some(dir.path().join("run")),
            run_id: Some("held".into()),
            control: false,
            paused: true,
            ..SessionOptions::default()
        };
        let mut s = Scene::with(&p, opts, dir, 0.5, 120, 36, None)
            .await
            .unwrap();
        select(&mut s, "later");
        s.press(&keys("o r +2")).await;
        let t = text(&s.render());
        assert!(
            t.lines().next().unwrap().contains("● running — 1 held"),
            "{t}"
        );
        // The lane counts say it too, as ctl status does.
        let counts_line = t.lines().nth(1).unwrap();
        assert!(
            counts_line.contains("paused 1  held 1  succeeded 1"),
            "{counts_line}"
        );
        let ctl = playdeck::control::status(&s.session.handle, None)
            .await
            .unwrap();
        assert_eq!(ctl.held, 1);
        select(&mut s, "later");
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(
            t.contains("waiting for held by console (") && t.contains(") at 0.5s (2.0s ago)"),
            "{t}"
        );
        // Unheld, the header stops counting it.
        s.press(&keys("esc o")).await;
        let t = text(&s.render());
        assert!(!t.lines().nth(1).unwrap().contains("held"), "{t}");
        s.finish().await;
    }

    #[test]
    fn the_exit_line_names_the_run_its_outcome_and_how_to_take_it_up() {
        use playdeck::console::run::{Ended, StopSignal, exit_line};
        let themes = playdeck::console::theme::load_all(None).unwrap();
        let mut app = playdeck::console::app::App::new(
            &Default::default(),
            themes,
            0,
            playdeck::console::keymap::Keymap::defaults(),
            false,
            Default::default(),
        );
        app.vm.fold(&playdeck::kernel::Signal {
            v: 1,
            seq: 1,
            elapsed: 0.0,
            kind: SignalKind::RunStarted {
                run_id: "r1".into(),
                play: "p".into(),
                operations: 0,
                max_concurrent: 1,
                reactive: true,
                max_spawn: 1,
                paused: false,
                budget: None,
            },
        });
        // Cancelled from elsewhere while the console watched.
        assert_eq!(
            exit_line(&app, Outcome::Cancelled, Ended::Quit),
            "playdeck: run r1 cancelled (through playdeck ctl); resume it: playdeck resume r1"
        );
        app.quit_cancelled = true;
        assert_eq!(
            exit_line(&app, Outcome::Cancelled, Ended::Quit),
            "playdeck: run r1 cancelled (quit from the console); resume it: playdeck resume r1"
        );
        assert_eq!(
            exit_line(&app, Outcome::Cancelled, Ended::Stopped(StopSignal::Hangup)),
            "playdeck: run r1 cancelled (stopped by SIGHUP); resume it: playdeck resume r1"
        );
        assert_eq!(
            exit_line(&app, Outcome::Succeeded, Ended::Quit),
            "playdeck: run r1 succeeded (0 operations)"
        );
        app.hooks.resume_name = Some("/tmp/runs/r1".into());
        app.vm.fold(&playdeck::kernel::Signal {
            v: 1,
            seq: 2,
            elapsed: 0.0,
            kind: SignalKind::Resumed {
                from_seq: 1,
                resumes: 1,
                reattempted: Vec::new().into(),
                dropped_reservations: Vec::new().into(),
            },
        });
        assert_eq!(
            exit_line(&app, Outcome::Cancelled, Ended::InputClosed),
            "playdeck: resumed run r1 cancelled (the terminal closed); resume it: playdeck resume /tmp/runs/r1"
        );
    }
}

/// Issue 20: the cursor is an operation, not a row number; every operation
/// key names its target; what another terminal does shows, with who.
mod cursor {
    use super::*;
    use playdeck::kernel::Request;
    use std::sync::Arc;

    const GATES: &str = include_str!("../../examples/plays/gates.toml");

    /// The gates play with all three gates waiting.
    async fn gates() -> Scene {
        let s = Scene::at(&play(GATES), 1.0, 120, 36, None).await.unwrap();
        assert_eq!(s.app.vm.approvals_waiting(), 3);
        s
    }

    /// Issue 42: in a lane the run carries along, rows leave the cursor
    /// all the time; that is not news. The guard still holds the next key.
    #[tokio::test(start_paused = true)]
    async fn a_busy_lane_moves_the_cursor_without_a_word() {
        let mut s = demo(0.5, 160, 48).await;
        let first = s.app.vm.lanes[0].window(0, 1)[0];
        s.app.go_to(first);
        s.render();
        let said = s.app.messages.len();
        s.wait(8.0).await;
        s.render();
        assert_ne!(s.app.selected_node(), Some(first), "the run moved it");
        let moved: Vec<_> = s
            .app
            .messages
            .iter()
            .skip(said)
            .filter(|m| m.text.contains("the cursor moved"))
            .collect();
        assert!(moved.is_empty(), "{moved:?}");
        assert!(s.app.drift.is_some(), "the guard is set all the same");
        s.finish().await;
    }

    /// Issue 42: gates approved together elsewhere read as one line here.
    #[tokio::test(start_paused = true)]
    async fn another_terminals_approvals_in_a_row_read_as_one_line() {
        let mut s = gates().await;
        for op in ["gate-a", "gate-b", "gate-c"] {
            ctl(
                &mut s,
                Request::Approve {
                    op: op.into(),
                    on: None,
                },
            )
            .await;
        }
        let together: Vec<_> = s
            .app
            .messages
            .iter()
            .filter(|m| m.text.contains("ctl (ana, pid 77): approve"))
            .collect();
        assert_eq!(together.len(), 1, "{together:?}");
        assert_eq!(
            together[0].text,
            "ctl (ana, pid 77): approve gate-a, gate-b, gate-c"
        );
        s.finish().await;
    }

    /// Notices of a kind fold into one line with a count, and never take
    /// the status line from another message still showing.
    #[tokio::test(start_paused = true)]
    async fn notices_fold_and_leave_real_messages_showing() {
        let mut s = gates().await;
        let before = s.app.messages.len();
        s.app
            .notice("cursor moved", "gate-a left awaiting approval");
        s.app
            .notice("cursor moved", "gate-b left awaiting approval");
        s.app
            .notice("cursor moved", "gate-c left awaiting approval");
        assert_eq!(status(&s), "gate-c left awaiting approval ×3");
        assert_eq!(s.app.messages.len(), before + 1);
        s.app.info("approved gate-a");
        s.app.notice("cursor moved", "ship left queued");
        assert_eq!(status(&s), "approved gate-a", "the real message stays");
        assert_eq!(s.app.messages.len(), before + 3, "the notice is logged");
        s.press(&keys("M")).await;
        let t = text(&s.render());
        assert!(t.contains("gate-c left awaiting approval ×3"), "{t}");
        s.finish().await;
    }

    /// What another terminal's `playdeck ctl` does.
    async fn ctl(s: &mut Scene, req: Request) {
        s.session
            .handle
            .request_by(req, Arc::from("ctl (ana, pid 77)"))
            .await
            .unwrap();
        s.wait(0.01).await;
    }

    fn lane(s: &Scene, name: &str) -> Lane {
        s.app.vm.by_name(name).unwrap().lane
    }

    /// In the problems list too: a gate decided elsewhere takes the cursor
    /// to the titles, where no key acts, not onto its neighbour.
    #[tokio::test(start_paused = true)]
    async fn a_problem_decided_elsewhere_leaves_the_problems_list_cursor_on_nothing() {
        let mut s = gates().await;
        s.press(&keys("P")).await;
        let on = s
            .app
            .target()
            .map(|ix| s.app.vm.node(ix).name().to_string());
        assert_eq!(on.as_deref(), Some("gate-a"));
        ctl(
            &mut s,
            Request::Approve {
                on: None,
                op: "gate-a".into(),
            },
        )
        .await;
        assert_eq!(
            s.app.target(),
            None,
            "no neighbour is chosen for the operator"
        );
        assert!(
            status(&s).contains("gate-a left the problems list"),
            "{}",
            status(&s)
        );
        s.press(&keys("a")).await;
        assert_eq!(lane(&s, "gate-b"), Lane::AwaitingApproval, "untouched");
        assert_eq!(lane(&s, "gate-c"), Lane::AwaitingApproval, "untouched");
        // ↓ selects the next one, named in the footer before a acts.
        s.press(&keys("j")).await;
        let t = text(&s.render());
        assert!(t.contains("gate-b: a approve"), "{t}");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_cursor_stays_on_its_gate_when_one_above_it_is_approved_elsewhere() {
        let mut s = gates().await;
        s.press(&keys("l l j")).await;
        assert_eq!(selected_name(&s).as_deref(), Some("gate-b"));
        let t = text(&s.render());
        assert!(
            t.contains(" gate-b: a approve  d deny"),
            "the footer names the target:\n{t}"
        );
        ctl(
            &mut s,
            Request::Approve {
                on: None,
                op: "gate-a".into(),
            },
        )
        .await;
        assert_ne!(lane(&s, "gate-a"), Lane::AwaitingApproval);
        assert_eq!(selected_name(&s).as_deref(), Some("gate-b"), "not gate-c");
        assert_eq!(status(&s), "ctl (ana, pid 77): approve gate-a");
        s.press(&keys("a")).await;
        assert_eq!(status(&s), "approved gate-b");
        assert_ne!(lane(&s, "gate-b"), Lane::AwaitingApproval);
        assert_eq!(lane(&s, "gate-c"), Lane::AwaitingApproval, "untouched");
        s.finish().await;
    }

    /// `W` goes to the gate that has waited longest, from anywhere, and
    /// `a` then approves that one.
    #[tokio::test(start_paused = true)]
    async fn shift_w_goes_to_the_oldest_gate_and_a_approves_it() {
        let mut s = gates().await;
        let oldest = ["gate-a", "gate-b", "gate-c"]
            .into_iter()
            .min_by(|a, b| {
                let at = |n: &str| {
                    let ix = s.app.vm.ix(&s.app.vm.by_name(n).unwrap().op.op_id).unwrap();
                    s.app.vm.history(ix).last().unwrap().1
                };
                at(a).total_cmp(&at(b)).then(a.cmp(b))
            })
            .unwrap();
        s.press(&keys("tab W")).await;
        assert_eq!(selected_name(&s).as_deref(), Some(oldest));
        assert!(
            status(&s).starts_with(&format!("{oldest} has waited ")),
            "{}",
            status(&s)
        );
        assert!(status(&s).contains("(the oldest of 3)"), "{}", status(&s));
        s.press(&keys("a")).await;
        assert_eq!(status(&s), format!("approved {oldest}"));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn when_its_gate_leaves_the_cursor_moves_says_so_and_the_next_key_acts_on_nothing() {
        let mut s = gates().await;
        s.press(&keys("l l j")).await;
        s.render();
        ctl(
            &mut s,
            Request::Approve {
                on: None,
                op: "gate-b".into(),
            },
        )
        .await;
        assert_eq!(selected_name(&s).as_deref(), Some("gate-c"));
        let st = status(&s);
        assert!(
            st.starts_with("gate-b left awaiting approval")
                && st.contains("approve gate-b by ctl (ana, pid 77)")
                && st.ends_with("the cursor moved to gate-c"),
            "{st}"
        );
        // The operator pressed `a` meaning gate-b: gate-c is not approved.
        s.press(&keys("a")).await;
        assert_eq!(lane(&s, "gate-c"), Lane::AwaitingApproval);
        assert_eq!(
            status(&s),
            "gate-b left the lane, so the cursor moved to gate-c: nothing done — press a again to approve gate-c"
        );
        // Pressed again at once (a held key), it still does nothing.
        s.press(&keys("a")).await;
        assert_eq!(lane(&s, "gate-c"), Lane::AwaitingApproval);
        // Pressed again, having read the name: it acts.
        s.press(&keys("+1 a")).await;
        assert_eq!(status(&s), "approved gate-c");
        assert_eq!(lane(&s, "gate-a"), Lane::AwaitingApproval, "untouched");
        s.finish().await;
    }

    /// Issue 38: `a a a` 50 ms apart (a held key) approves the gate the
    /// operator saw, not the two that slid under the cursor after it.
    #[tokio::test(start_paused = true)]
    async fn a_held_key_decides_only_the_gate_the_operator_saw() {
        let mut s = gates().await;
        s.press(&keys("l l")).await;
        s.render();
        let first = selected_name(&s).unwrap();
        s.press(&keys("a +0.05 a +0.05 a")).await;
        let approved: Vec<&str> = ["gate-a", "gate-b", "gate-c"]
            .into_iter()
            .filter(|n| lane(&s, n) != Lane::AwaitingApproval)
            .collect();
        assert_eq!(approved, [first.as_str()]);
        let next = selected_name(&s).unwrap();
        assert!(
            status(&s).contains(&format!("press a again to approve {next}")),
            "{}",
            status(&s)
        );
        // Read, then pressed: it acts on the one named.
        s.press(&keys("+1 a")).await;
        assert_eq!(status(&s), format!("approved {next}"));
        s.finish().await;
    }

    /// The same in the problems list: the operator's own decision leaves
    /// the cursor on the next row, which the next key names, not decides.
    #[tokio::test(start_paused = true)]
    async fn a_held_key_in_the_problems_list_decides_only_the_row_seen() {
        let mut s = gates().await;
        s.press(&keys("P")).await;
        let first = s
            .app
            .target()
            .map(|ix| s.app.vm.node(ix).name().to_string())
            .unwrap();
        s.press(&keys("a +0.05 a +0.05 a")).await;
        let decided: Vec<&str> = ["gate-a", "gate-b", "gate-c"]
            .into_iter()
            .filter(|n| lane(&s, n) != Lane::AwaitingApproval)
            .collect();
        assert_eq!(decided, [first.as_str()]);
        let next = s
            .app
            .target()
            .map(|ix| s.app.vm.node(ix).name().to_string())
            .unwrap();
        assert!(
            status(&s).contains(&format!(
                "left the problems list, so the cursor moved to {next}"
            )),
            "{}",
            status(&s)
        );
        s.press(&keys("+1 a")).await;
        assert_eq!(status(&s), format!("approved {next}"));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_move_of_the_operators_own_clears_the_warning() {
        let mut s = gates().await;
        s.press(&keys("l l j")).await;
        ctl(
            &mut s,
            Request::Deny {
                on: None,
                op: "gate-b".into(),
                reason: vec![],
            },
        )
        .await;
        assert_eq!(selected_name(&s).as_deref(), Some("gate-c"));
        s.press(&keys("k a")).await;
        assert_eq!(status(&s), "approved gate-a");
        s.finish().await;
    }

    /// The queued lane loses its first rows as they start: the cursor
    /// stays on the operation it was on.
    #[tokio::test(start_paused = true)]
    async fn in_the_queued_lane_the_cursor_follows_its_operation_as_rows_above_start() {
        let mut ops = String::from(
            "[play]\nname = \"q\"\nmax_concurrent = 1\n[palette]\nroles = [{ role = \"implementer\" }]\n",
        );
        for i in 0..6 {
            ops.push_str(&format!(
                "[[operations]]\nid = \"op-{i}\"\nrole = \"implementer\"\ninstruction = \"x\"\nindependent_root = true\nsim = {{ duration_ms = 1000 }}\n"
            ));
        }
        let mut s = Scene::at(&play(&ops), 0.5, 120, 36, None).await.unwrap();
        s.press(&keys("j j")).await;
        let picked = selected_name(&s).unwrap();
        let row = s.app.lanes[0].selected().unwrap();
        s.wait(2.0).await;
        assert_eq!(selected_name(&s), Some(picked.clone()));
        assert!(s.app.lanes[0].selected().unwrap() < row, "its row moved up");
        assert!(s.app.drift.is_none(), "nothing left under the cursor");
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_log_records_who_took_each_action() {
        let mut s = gates().await;
        select(&mut s, "gate-a");
        s.press(&keys("a")).await;
        ctl(
            &mut s,
            Request::Hold {
                op: "gate-c".into(),
            },
        )
        .await;
        let log = s.log();
        let approved_by = log
            .iter()
            .find_map(|sig| match &sig.kind {
                SignalKind::Approved { by, .. } => Some(by.to_string()),
                _ => None,
            })
            .unwrap();
        assert!(
            approved_by.starts_with("console (")
                && approved_by.contains(&format!("pid {}", std::process::id())),
            "{approved_by}"
        );
        let actions: Vec<(String, String)> = log
            .iter()
            .filter_map(|sig| match &sig.kind {
                SignalKind::OperatorAction { by, action, .. } => {
                    Some((by.to_string(), action.to_string()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(actions.len(), 2, "{actions:?}");
        assert_eq!(actions[0], (approved_by, "approve gate-a".to_string()));
        assert_eq!(
            actions[1],
            ("ctl (ana, pid 77)".to_string(), "hold gate-c".to_string())
        );
        s.finish().await;
    }
}

/// Issue 20: what is said of a skipped operation is that it was skipped,
/// and why; a hint that names some failures says how many there are.
mod honest {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_skipped_operation_says_skipped_and_which_dependency_failed() {
        let mut s = Scene::at(&fails_held_open(), 3.0, 120, 36, None)
            .await
            .unwrap();
        select(&mut s, "load-tests");
        s.press(&keys("o")).await;
        assert_eq!(
            status(&s),
            "load-tests was skipped (integration-tests failed); only an operation that has not started can be held"
        );
        s.press(&keys("enter")).await;
        let t = text(&s.render());
        assert!(t.contains("║ skipped "), "{t}");
        assert!(t.contains("integration-tests failed"), "{t}");
        assert!(t.contains("→ skipped at"), "{t}");
        assert!(!t.contains("→ failed at"), "{t}");
        // ship was skipped because load-tests was.
        let ship = s.app.vm.by_name("ship").unwrap().op.op_id;
        let ix = s.app.vm.ix(&ship).unwrap();
        assert_eq!(
            s.app.vm.skip_cause(ix).as_deref(),
            Some("load-tests was skipped")
        );
        select(&mut s, "build");
        s.press(&keys("esc o")).await;
        assert_eq!(
            status(&s),
            "build has succeeded; only an operation that has not started can be held"
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_exit_lines_retry_hint_says_when_it_names_only_some_failures() {
        let mut ops = String::from(
            "[play]\nname = \"many\"\nmax_concurrent = 5\n[palette]\nroles = [{ role = \"tester\" }]\n",
        );
        for i in 0..5 {
            ops.push_str(&format!(
                "[[operations]]\nid = \"t{i}\"\nrole = \"tester\"\ninstruction = \"x\"\nindependent_root = true\nsim = {{ duration_ms = 100, outcome = \"fail\", error = \"boom\" }}\n"
            ));
        }
        let s = Scene::at(&play(&ops), 2.0, 120, 36, None).await.unwrap();
        let line = playdeck::console::run::exit_line(
            &s.app,
            Outcome::Failed,
            playdeck::console::run::Ended::Quit,
        );
        let name = s.app.resume_name();
        assert!(
            line.contains(&format!("--retry t0 --retry t1 --retry t2 (3 of 5 failed operations; `playdeck report {name}` lists them all)")),
            "{line}"
        );
        s.finish().await;
    }
}

/// Issue 25, an actionable capacity pane: select an instance, release it
/// (idle only, any lifetime), go to its operation, and reasons in words.
mod capacity_pane {
    use super::*;
    use playdeck::console::app::Pane;
    use playdeck::vocab::InstanceState;

    /// At 5 s: one builder is busy with plan-api (it runs a minute), the
    /// other is idle and due (current_round; the run has not drained, so no
    /// round end released it), keeper-1 is idle and kept (manual_release).
    const CAP: &str = include_str!("../plays/capacity_pane.toml");

    async fn cap(at: f64) -> Scene {
        Scene::at(&play(CAP), at, 120, 36, None).await.unwrap()
    }

    /// The short name (`builder-2`) of the instance in `state` running
    /// `op` (or none).
    fn instance(s: &Scene, state: InstanceState, op: Option<&str>) -> String {
        let i = s
            .app
            .vm
            .capacity
            .instances
            .values()
            .find(|i| i.state == state && i.op.as_deref() == op)
            .unwrap_or_else(|| panic!("no {state:?} instance running {op:?}"));
        i.name.trim_start_matches("loop-demo-").to_string()
    }

    fn selected(s: &Scene) -> Option<String> {
        s.app
            .selected_instance()
            .map(|i| i.name.trim_start_matches("loop-demo-").to_string())
    }

    /// Moves focus to the capacity pane, then the cursor to `short`, with
    /// keys only.
    async fn select_instance(s: &mut Scene, short: &str) {
        while s.app.focus != Pane::Capacity {
            s.press(&keys("tab")).await;
        }
        s.press(&keys("g")).await;
        for _ in 0..s.app.capacity.len() {
            if selected(s).as_deref() == Some(short) {
                return;
            }
            s.press(&keys("down")).await;
        }
        panic!("{short} is not in the capacity pane");
    }

    #[tokio::test(start_paused = true)]
    async fn tab_selects_an_instance_and_arrows_move_between_them_highlighted() {
        let mut s = cap(5.0).await;
        s.press(&keys("tab tab tab")).await;
        assert_eq!(s.app.focus, Pane::Capacity);
        // Focus lands on the first instance, not on the profile's title.
        let first = selected(&s).expect("an instance is selected");
        assert!(first.starts_with("builder-"), "{first}");
        assert!(
            status(&s).starts_with(&format!("{first} · builder (implementer) · ")),
            "{}",
            status(&s)
        );
        s.press(&keys("down")).await;
        let second = selected(&s).expect("the next row is the other builder");
        assert_ne!(first, second);
        // Past the builders: keeper's title, then keeper-1.
        s.press(&keys("down")).await;
        assert_eq!(selected(&s), None, "a profile's title is no instance");
        s.press(&keys("down")).await;
        assert_eq!(selected(&s).as_deref(), Some("keeper-1"));
        assert!(
            status(&s).contains("keeper-1 · keeper (tester) · idle ")
                && status(&s).contains("kept: manual_release; X releases it"),
            "{}",
            status(&s)
        );
        // The selected row is drawn as the lanes draw theirs.
        let buf = s.render();
        let sel = s.app.theme().selection_bg;
        let g = s.app.geometry.capacity;
        let row = (g.y..g.y + g.height)
            .find(|&y| {
                (g.x..g.x + g.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .contains("keeper-1")
            })
            .expect("keeper-1 shows");
        assert_eq!(buf[(g.x + 3, row)].bg, sel, "keeper-1's row is highlighted");
        let other = (g.y..g.y + g.height)
            .find(|&y| {
                (g.x..g.x + g.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .contains(&first)
            })
            .unwrap();
        assert_ne!(buf[(g.x + 3, other)].bg, sel, "only the selected row is");
        // The footer names the instance its keys act on.
        let t = text(&buf);
        assert!(t.contains("keeper-1: X release it"), "{t}");
        s.finish().await;
    }

    /// The pane with keeper-1 selected, wide enough for every word, and
    /// the whole screen with its footer and status line; then X's question.
    #[tokio::test(start_paused = true)]
    async fn snapshots_of_the_selected_instance_and_its_release_question() {
        let mut s = cap(5.0).await;
        select_instance(&mut s, "keeper-1").await;
        let pane = {
            let Ok(mut term) = ratatui::Terminal::new(ratatui::backend::TestBackend::new(60, 10));
            let Ok(_) = term.draw(|f| playdeck::console::ui::draw_capacity(f, f.area(), &s.app));
            text(term.backend().buffer())
        };
        // Which builder ran plan-api depends on which started first.
        let busy = instance(&s, InstanceState::Busy, Some("plan-api"));
        let redact = |t: String| {
            let other = if busy == "builder-1" {
                "builder-2"
            } else {
                "builder-1"
            };
            t.replace(&busy, "builder-B").replace(other, "builder-I")
        };
        insta::assert_snapshot!("capacity_pane_selected", redact(pane));
        insta::assert_snapshot!("capacity_selected_screen", redact(text(&s.render())));
        s.press(&keys("X")).await;
        insta::assert_snapshot!(
            "capacity_release_instance_question",
            redact(text(&s.render()))
        );
        s.finish().await;
    }

    /// A `[cluster]` run's workers as its hub said them at `at`.
    fn workers_said(s: &mut Scene, at: f64) {
        let w = |id: &str, busy, tags: &[&str], beat_age| playdeck::kernel::WorkerSeen {
            id: id.into(),
            host: id.split('-').next().unwrap().into(),
            slots: 4,
            busy,
            tags: tags.iter().map(|t| (*t).into()).collect(),
            beat_age,
            draining: false,
        };
        let sig = playdeck::kernel::Signal {
            v: 1,
            seq: s.app.vm.seq + 1,
            elapsed: at,
            kind: playdeck::kernel::SignalKind::Workers {
                workers: vec![
                    w("gpu01-4411", 3, &["gpu"], 0.4),
                    w("box02-977", 0, &[], 1.2),
                    w("box03-1203", 1, &[], 8.0),
                ]
                .into(),
            },
        };
        s.app.fold(&sig);
    }

    /// The pane alone, its window as tall as the pane.
    fn pane(s: &mut Scene, w: u16, h: u16) -> String {
        let rows = s.app.capacity_rows().len();
        let gauge = usize::from(s.app.capacity_gauge_rows());
        s.app.capacity.resize(rows, usize::from(h) - 2 - gauge);
        let s = &*s;
        let Ok(mut term) = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h));
        let Ok(_) = term.draw(|f| playdeck::console::ui::draw_capacity(f, f.area(), &s.app));
        text(term.backend().buffer())
    }

    /// Workers head the pane: how many, their load, each one's slots,
    /// tags and heartbeat; a silent one says for how long, counted on.
    #[tokio::test(start_paused = true)]
    async fn a_cluster_run_s_workers_head_the_capacity_pane() {
        let mut s = cap(5.0).await;
        workers_said(&mut s, 3.0);
        let p = pane(&mut s, 60, 14);
        assert!(p.contains("workers 3 · busy 4/12"), "{p}");
        assert!(p.contains("gpu01-4411 3/4 · gpu · beating"), "{p}");
        // Said at 3 s, 8 s silent then; the console's clock is at 5 s.
        assert!(p.contains("box03-1203 1/4 · silent 10s"), "{p}");
        assert!(p.contains("builder"), "the profiles follow: {p}");
        // Down to the first profile: which builder runs plan-api varies.
        let head: Vec<&str> = p.lines().take(7).collect();
        insta::assert_snapshot!("capacity_pane_workers", head.join("\n"));
        s.finish().await;
    }

    /// Without `[capacity]` the pane still lists the workers, and says
    /// there are no instance limits.
    #[tokio::test(start_paused = true)]
    async fn workers_show_in_a_run_without_capacity() {
        let mut s = Scene::at(&play(PLAIN), 1.0, 120, 36, None).await.unwrap();
        assert!(pane(&mut s, 60, 8).contains("no [capacity]"));
        workers_said(&mut s, 1.0);
        let p = pane(&mut s, 60, 8);
        assert!(p.contains("workers 3 · busy 4/12"), "{p}");
        assert!(!p.contains("nodes "), "no gauge without instances: {p}");
        assert!(p.contains("no [capacity]"), "{p}");
        s.finish().await;
    }

    const PLAIN: &str = include_str!("../plays/plain_gate.toml");

    #[tokio::test(start_paused = true)]
    async fn x_releases_the_selected_idle_instance_after_naming_it() {
        let mut s = cap(5.0).await;
        let idle = instance(&s, InstanceState::Ready, None);
        let idle = if idle == "keeper-1" {
            // The builder that ran `quick` is the due one.
            s.app
                .vm
                .capacity
                .instances
                .values()
                .find(|i| i.state == InstanceState::Ready && i.profile.as_ref() == "builder")
                .map(|i| i.name.trim_start_matches("loop-demo-").to_string())
                .unwrap()
        } else {
            idle
        };
        select_instance(&mut s, &idle).await;
        s.press(&keys("X")).await;
        assert!(
            matches!(
                s.app.overlay(),
                Some(Overlay::ConfirmReleaseInstance { .. })
            ),
            "X asks first"
        );
        let t = text(&s.render());
        assert!(t.contains(&format!("Release {idle} now?")), "{t}");
        assert!(
            t.contains(&format!(
                "playdeck ctl demo release --name loop-demo-{idle}"
            )),
            "{t}"
        );
        s.press(&keys("y")).await;
        let full = format!("loop-demo-{idle}");
        assert_eq!(
            s.app.vm.capacity.instances[full.as_str()].state,
            InstanceState::Released
        );
        assert_eq!(status(&s), format!("released {full}"));
        let t = text(&s.render());
        assert!(
            !t.contains(&format!("{idle} idle")),
            "it left the pane: {t}"
        );
        // Issue 42: the cursor stays on an instance, not a title; other
        // consoles are told which instance went.
        assert!(s.app.selected_instance().is_some(), "{t}");
        assert!(
            s.log().iter().any(|sig| matches!(&sig.kind,
                SignalKind::OperatorAction { action, .. }
                    if action.contains(&format!("released {full}")))),
            "the broadcast names it"
        );
        // manual_release is released by name too: the operator's release.
        select_instance(&mut s, "keeper-1").await;
        s.press(&keys("X y")).await;
        assert_eq!(
            s.app.vm.capacity.instances["loop-demo-keeper-1"].state,
            InstanceState::Released
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn x_on_a_busy_instance_is_refused_with_the_reason() {
        let mut s = cap(5.0).await;
        let busy = instance(&s, InstanceState::Busy, Some("plan-api"));
        select_instance(&mut s, &busy).await;
        s.press(&keys("X")).await;
        assert!(s.app.overlays.is_empty(), "no question for what cannot go");
        assert_eq!(
            status(&s),
            format!("{busy} is busy with plan-api; only idle instances are released")
        );
        let full = format!("loop-demo-{busy}");
        assert_eq!(
            s.app.vm.capacity.instances[full.as_str()].state,
            InstanceState::Busy,
            "nothing was asked of the run"
        );
        // X outside the capacity pane says where it works.
        s.press(&keys("tab X")).await;
        assert!(
            status(&s).contains("X releases the instance selected in the capacity pane"),
            "{}",
            status(&s)
        );
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn enter_goes_to_the_operation_a_busy_instance_runs_or_says_it_is_idle() {
        let mut s = cap(5.0).await;
        select_instance(&mut s, "keeper-1").await;
        s.press(&keys("enter")).await;
        assert_eq!(s.app.focus, Pane::Capacity, "nothing to go to");
        assert!(
            status(&s).starts_with("keeper-1 is idle (")
                && status(&s).ends_with("): no operation runs on it"),
            "{}",
            status(&s)
        );
        let busy = instance(&s, InstanceState::Busy, Some("plan-api"));
        select_instance(&mut s, &busy).await;
        s.press(&keys("enter")).await;
        assert_eq!(s.app.focus, Pane::Lanes);
        assert_eq!(selected_name(&s).as_deref(), Some("plan-api"));
        assert_eq!(status(&s), format!("plan-api runs on {busy} (running)"));
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn x_with_nothing_due_asks_nothing_and_says_why() {
        let mut s = cap(5.0).await;
        // Something is due: the question opens.
        s.press(&keys("x")).await;
        assert!(matches!(
            s.app.overlay(),
            Some(Overlay::ConfirmRelease { .. })
        ));
        s.press(&keys("y")).await;
        // The release found the busy builder working: it kept it, marked.
        let busy = instance(&s, InstanceState::Retained, Some("plan-api"));
        assert_eq!(
            status(&s),
            format!("released 1, retained 1 (loop-demo-{busy} — busy)")
        );
        // Now only the busy builder and the manual_release keeper are left.
        s.press(&keys("x")).await;
        assert!(s.app.overlays.is_empty(), "no empty question");
        let st = status(&s);
        assert!(
            st.starts_with(&format!(
                "nothing is due for release: {busy} busy: plan-api · retained; keeper-1 idle "
            )),
            "{st}"
        );
        assert!(
            st.ends_with("kept: manual_release (capacity pane: select one, X releases it)"),
            "{st}"
        );
        // The footer does not offer it; help says why.
        let t = text(&s.render());
        assert!(!t.contains("x release"), "{t}");
        assert!(s.app.available(Action::Release).is_err());
        s.finish().await;
    }
}

/// Following an agent (`F`), its output in the pager (`O`), its worktree's
/// diff (`D`): what each key does, and why it cannot when it cannot.
mod following {
    use super::*;
    use std::io::Write;

    /// Appends `lines` to the attempt's stdout log, as its runner does.
    fn print(s: &Scene, name: &str, attempt: u32, lines: std::ops::Range<usize>) {
        let logs = s.app.hooks.run_dir.clone().unwrap().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{name}.{attempt}.stdout.log")))
            .unwrap();
        for i in lines {
            writeln!(f, "line {i}").unwrap();
        }
    }

    fn follow(s: &Scene) -> &playdeck::console::follow::FollowView {
        match s.app.overlay() {
            Some(Overlay::Follow(v)) => v,
            _ => panic!("not following"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn following_sticks_to_the_newest_line_until_the_operator_scrolls_up() {
        let mut s = demo(12.0, 120, 36).await;
        let ix = s.app.vm.lane(Lane::Running).iter().next().unwrap();
        let (name, attempt) = {
            let n = s.app.vm.node(ix);
            (n.name().to_string(), n.attempt)
        };
        s.app.go_to(ix);
        s.press(&keys("F")).await;
        assert_eq!(s.app.mode(), Mode::Follow);
        print(&s, &name, attempt, 0..100);
        let t = text(&s.render());
        assert!(t.contains("line 99") && !t.contains("line 60 "), "{t}");
        assert!(t.contains("● following"), "{t}");
        // As the agent prints, the view keeps to its newest line.
        print(&s, &name, attempt, 100..130);
        let t = text(&s.render());
        // 32 rows show: 98 to 129.
        assert!(t.contains("line 129") && !t.contains("line 97 "), "{t}");
        // Scrolled up, it stays where the operator put it.
        s.press(&keys("k k")).await;
        assert!(!follow(&s).stick);
        print(&s, &name, attempt, 130..160);
        let t = text(&s.render());
        assert!(t.contains("line 127") && !t.contains("line 128"), "{t}");
        assert!(t.contains("‖ scrolled back: end/G follows"), "{t}");
        assert!(t.contains("↓ 32 more"), "{t}");
        // The end follows again.
        s.press(&keys("G")).await;
        print(&s, &name, attempt, 160..165);
        let t = text(&s.render());
        assert!(t.contains("line 164") && t.contains("● following"), "{t}");
        // F again says what is going on instead of stacking a second view.
        s.press(&keys("F")).await;
        assert!(
            status(&s).starts_with(&format!("already following {name}: esc/q goes back")),
            "{}",
            status(&s)
        );
        s.press(&keys("esc")).await;
        assert_eq!(s.app.mode(), Mode::Live);
        s.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn pager_and_diff_name_the_attempt_and_refuse_in_words() {
        let mut s = demo(12.0, 120, 36).await;
        // Nothing selected in a bottom pane: said how to get there.
        s.press(&keys("tab O")).await;
        assert_eq!(
            status(&s),
            "select an operation in the lanes to page its output (tab goes back to them)"
        );
        // Not started: nothing to page, nothing to diff; following works.
        let queued = s.app.vm.lane(Lane::Queued).iter().next().unwrap();
        let qname = s.app.vm.node(queued).name().to_string();
        s.app.go_to(queued);
        s.press(&keys("O")).await;
        assert_eq!(
            status(&s),
            format!("{qname} has not started an attempt yet: no output to page")
        );
        s.press(&keys("D")).await;
        assert_eq!(
            status(&s),
            format!("{qname} has not started an attempt yet: no workspace to diff")
        );
        assert!(s.pages.is_empty());
        assert!(s.app.available(Action::FollowAgent).is_ok());
        // Running: O and D ask for the pager on its latest attempt, from the
        // lanes and from the follow view alike.
        let ix = s.app.vm.lane(Lane::Running).iter().next().unwrap();
        let n = s.app.vm.node(ix).clone();
        s.app.go_to(ix);
        s.press(&keys("O F D")).await;
        let run_dir = s.app.hooks.run_dir.clone().unwrap();
        assert_eq!(
            s.pages,
            vec![
                playdeck::console::app::Page::Output {
                    op: n.name().to_string(),
                    attempt: n.attempt,
                    logs: run_dir.join("logs"),
                },
                playdeck::console::app::Page::Diff {
                    node: ix,
                    op: n.name().to_string(),
                    attempt: n.attempt,
                    instance: n
                        .current()
                        .and_then(|a| a.instance.as_deref())
                        .map(str::to_string),
                    run_dir: run_dir.clone(),
                    review: None,
                },
            ]
        );
        // Help in the follow view lists them, with the list keys.
        s.press(&keys("?")).await;
        let t = text(&s.render());
        assert!(t.contains("Keys · following an agent"), "{t}");
        assert!(t.contains("its agent: output and worktree"), "{t}");
        s.finish().await;
    }
}

/// Issue 38: a gate one of whose dependencies failed (with `when =
/// "always"`, one settled edge is enough) says so wherever it is decided:
/// its lane row, the problems list, the inspector's wait, the status
/// line and the bulk approval, which lists it first.
#[tokio::test(start_paused = true)]
async fn a_gate_whose_dependency_failed_says_so_where_it_is_decided() {
    let src = include_str!("../plays/gate_after_failed_dependency.toml");
    let mut s = Scene::at(&play(src), 1.0, 160, 36, None).await.unwrap();
    assert_eq!(s.app.vm.approvals_waiting(), 2);
    let t = text(&s.render());
    let row = t
        .lines()
        .find(|l| l.contains("ship"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(row.contains("✗ship") && row.contains("1/2 deps"), "{row}");
    let docs = t.lines().find(|l| l.contains("docs")).unwrap();
    assert!(!docs.contains("deps failed"), "{docs}");
    s.press(&keys("P")).await;
    let t = text(&s.render());
    assert!(
        t.contains("✗ 1 of 2 dependencies failed: svc12-integration"),
        "{t}"
    );
    s.press(&keys("esc")).await;
    // Both marked: the bulk confirmation lists the one with a failed
    // dependency first, with its words.
    let ship = s
        .app
        .vm
        .ix(&s.app.vm.by_name("ship").unwrap().op.op_id)
        .unwrap();
    let docs = s
        .app
        .vm
        .ix(&s.app.vm.by_name("docs").unwrap().op.op_id)
        .unwrap();
    s.app.marks.push((docs, Lane::AwaitingApproval));
    s.app.marks.push((ship, Lane::AwaitingApproval));
    s.press(&keys("a")).await;
    let t = text(&s.render());
    let first = t.find("⚑ ship").unwrap_or_else(|| panic!("{t}"));
    assert!(first < t.find("⚑ docs").unwrap(), "{t}");
    assert!(
        t.contains("1 of them with failed dependencies, listed first"),
        "{t}"
    );
    s.finish().await;
}

/// Issue 38: what was skipped is said to be skipped, never to have gone
/// to "failed": not when it leaves the cursor's lane, not in the
/// inspector.
#[tokio::test(start_paused = true)]
async fn a_skipped_operation_is_said_to_be_skipped_not_failed() {
    let mut s = Scene::at(&play(FAILS), 0.1, 120, 36, None).await.unwrap();
    select(&mut s, "load-tests");
    s.render();
    s.wait(3.0).await;
    assert!(s.app.vm.by_name("load-tests").unwrap().skipped());
    let st = status(&s);
    assert!(st.starts_with("load-tests left queued for skipped"), "{st}");
    select(&mut s, "load-tests");
    s.press(&keys("enter")).await;
    let t = text(&s.render());
    let lane = t
        .lines()
        .find(|l| l.contains("lane") && l.contains("skipped"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(!lane.contains("failed"), "{lane}");
    s.finish().await;
}
