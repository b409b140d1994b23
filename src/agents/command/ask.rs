//! Permission questions of one attempt (a ToolSet's `ask`). claude asks
//! the MCP tool `mcp__playdeck__ask` about each call its permissions leave
//! open; that tool (`playdeck ask-mcp SOCKET`, a process claude starts)
//! brings the question here, to a socket only this attempt listens on, in
//! a directory only its owner can enter. The policy answers what is not
//! the operator's to decide (a call no `ask` pattern covers is refused, as
//! without `ask`); the rest goes to the kernel, which holds the operation
//! in the approval lane until an operator answers, or the ToolSet's
//! `ask_timeout` denies it.
//!
//! The asking side can only ask: the socket takes a question and returns
//! the answer the kernel gave; nothing on it reaches the control socket.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::agents::outflow::Rows;
use crate::agents::transcript::{args_of, whole_args_of};
use crate::kernel::agent::{Answer, Question, Replier};
use crate::kernel::{AgentEvent, AgentEvents};
use crate::vocab::ToolSet;

/// The longest question read: a call's input (a file's content) can be
/// large, but not without bound.
const QUESTION_MAX: u64 = 4 << 20;

/// What the ask tool sends: claude's own arguments to its permission
/// prompt tool.
#[derive(Debug, Deserialize, Serialize)]
pub struct Asked {
    pub tool_name: String,
    #[serde(default)]
    pub input: Value,
}

/// The answer, as claude's permission prompt tool returns it.
#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum Told {
    Allow {
        #[serde(rename = "updatedInput")]
        updated_input: Value,
    },
    Deny {
        message: String,
    },
}

pub(super) struct AskServer {
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    house: Arc<House>,
    task: tokio::task::JoinHandle<()>,
}

/// Questions open at once on one attempt's socket (read, waiting their
/// turn or before the operator): past it a question is denied unread, so
/// its memory is bounded by this many [`QUESTION_MAX`]s.
const OPEN_MAX: usize = 8;

/// What every connection of one attempt's socket shares.
struct House {
    tools: ToolSet,
    events: AgentEvents,
    cwd: std::path::PathBuf,
    ids: AtomicU32,
    /// The attempt's agent process, once started: only it and what it
    /// starts may ask.
    asker: std::sync::OnceLock<i32>,
    open: tokio::sync::Semaphore,
    /// One question before the operator at a time; the next waits its
    /// turn (it never replaces the one waiting).
    turn: tokio::sync::Mutex<()>,
    /// The attempt's event bound, shared with its stream.
    rows: Rows,
}

impl Drop for AskServer {
    fn drop(&mut self) {
        // The attempt is over: nobody answers any more (a question still
        // waiting is denied by its asker's closed connection).
        self.task.abort();
    }
}

impl AskServer {
    pub(super) fn start(
        tools: ToolSet,
        events: AgentEvents,
        cwd: std::path::PathBuf,
        rows: Rows,
    ) -> std::io::Result<AskServer> {
        // Short (a socket path has ~100 bytes) and private.
        let dir = tempfile::Builder::new().prefix("pd-ask-").tempdir()?;
        crate::files::private_dir(dir.path())?;
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket)?;
        let house = Arc::new(House {
            tools,
            events,
            cwd,
            ids: AtomicU32::new(0),
            asker: std::sync::OnceLock::new(),
            open: tokio::sync::Semaphore::new(OPEN_MAX),
            turn: tokio::sync::Mutex::new(()),
            rows,
        });
        let task = tokio::spawn({
            let house = house.clone();
            async move {
                while let Ok((conn, _)) = listener.accept().await {
                    let accepted = crate::agents::ancestry::uptime_now();
                    let house = house.clone();
                    tokio::spawn(async move {
                        let _ = serve(conn, accepted, &house).await;
                    });
                }
            }
        });
        Ok(AskServer {
            _dir: dir,
            socket,
            house,
            task,
        })
    }

    pub(super) fn socket(&self) -> &Path {
        &self.socket
    }

    /// The attempt's agent process has started as `pid`.
    pub(super) fn asked_by(&self, pid: i32) {
        let _ = self.house.asker.set(pid);
    }
}

/// Why the process that connected may not ask here, if it may not: every
/// process of the same user can reach the socket (another run's agent
/// lists `/tmp/pd-ask-*`), but only this attempt's own descend from its
/// agent process (playdeck reaps their orphans, so none leaves that tree).
fn not_the_attempts(
    conn: &UnixStream,
    accepted: Option<f64>,
    asker: Option<i32>,
) -> Option<String> {
    use crate::agents::ancestry::{MAX_DEPTH, descends_from, while_the_same};
    let Some(asker) = asker else {
        return Some("the attempt has not started".into());
    };
    let Ok(Some(pid)) = conn.peer_cred().map(|c| c.pid()) else {
        return Some("who connected cannot be told".into());
    };
    let ours = while_the_same(pid, accepted, || {
        pid == asker || descends_from(pid, asker, MAX_DEPTH) == Ok(true)
    });
    match ours {
        Some(true) => None,
        _ => Some(format!(
            "pid {pid} is not a process of this attempt; only the attempt's own agent may ask on its socket"
        )),
    }
}

/// One question, one answer, on one connection.
async fn serve(conn: UnixStream, accepted: Option<f64>, house: &House) -> std::io::Result<()> {
    use tokio::io::AsyncReadExt;
    let told = 'told: {
        let Ok(_open) = house.open.try_acquire() else {
            break 'told Told::Deny {
                message: format!(
                    "{OPEN_MAX} questions of this attempt are open already; ask again once they are answered"
                ),
            };
        };
        if let Some(why) = not_the_attempts(&conn, accepted, house.asker.get().copied()) {
            break 'told Told::Deny {
                message: format!("playdeck refused the question: {why}"),
            };
        }
        let (r, mut w) = conn.into_split();
        let mut line = String::new();
        BufReader::new(r.take(QUESTION_MAX))
            .read_line(&mut line)
            .await?;
        let told = match serde_json::from_str::<Asked>(&line) {
            Ok(asked) => decide(asked, house).await,
            Err(e) => Told::Deny {
                message: format!("playdeck could not read the question: {e}"),
            },
        };
        return answer(&mut w, &told).await;
    };
    let (_, mut w) = conn.into_split();
    answer(&mut w, &told).await
}

async fn answer(w: &mut tokio::net::unix::OwnedWriteHalf, told: &Told) -> std::io::Result<()> {
    let mut out = serde_json::to_string(told).unwrap_or_default();
    out.push('\n');
    w.write_all(out.as_bytes()).await
}

/// The policy first, then the operator (through the kernel), within the
/// ToolSet's time.
async fn decide(asked: Asked, house: &House) -> Told {
    let (tools, events, cwd) = (&house.tools, &house.events, house.cwd.as_path());
    let args = args_of(Some(&asked.input));
    let whole = whole_args_of(Some(&asked.input));
    // What every view shows: never a control character of the agent's,
    // and never a cut that looks whole.
    let cut = args.ends_with('…') && args != whole;
    let head = crate::printable::printable(&if args.is_empty() {
        asked.tool_name.clone()
    } else if cut {
        format!("{}({args}) (cut)", asked.tool_name)
    } else {
        format!("{}({args})", asked.tool_name)
    })
    .into_owned();
    // Patterns decide on the whole call, not on what a view shows of it.
    if !tools.asks(&asked.tool_name, &whole) {
        return Told::Deny {
            message: format!(
                "{head} is not allowed: the ToolSet neither allows it nor leaves it to the operator"
            ),
        };
    }
    // Its turn: the question before it is answered.
    let _turn = house.turn.lock().await;
    // An asked question and its answer are two events of the attempt's.
    if !house.rows.add(2) {
        return Told::Deny {
            message: "this attempt has asked more than its record holds; it is stopped".into(),
        };
    }
    let id = house.ids.fetch_add(1, Ordering::Relaxed) + 1;
    let (tx, rx) = tokio::sync::oneshot::channel();
    // The operator decides on the whole call, and the answer binds to it.
    let detail = super::call::detail(&asked.tool_name, &asked.input, Some(cwd));
    let on = crate::kernel::basis::call_digest(&asked.tool_name, &asked.input);
    events.emit(AgentEvent::Asking(Question {
        id,
        tool: Arc::from(head.as_str()),
        kind: Default::default(),
        on: Some(Arc::from(on)),
        detail: Some(Arc::from(detail)),
        reply: Replier::new(tx),
    }));
    let timeout = tools.ask_timeout();
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(Answer { allow: true, .. })) => Told::Allow {
            updated_input: asked.input,
        },
        Ok(Ok(Answer { allow: false, why })) => Told::Deny {
            message: why.to_string(),
        },
        // Nobody holds the question: the attempt is ending, or it runs
        // where no operator can be asked (a NATS worker's attempt: the
        // question does not cross the bus).
        Ok(Err(_)) => Told::Deny {
            message: "no operator can answer: the operation is stopping, or it runs on a worker the run's operator cannot be asked from".into(),
        },
        Err(_) => {
            let why = format!("no answer within {} s: denied", timeout.as_secs());
            events.emit(AgentEvent::AskEnded {
                id,
                why: Arc::from(why.as_str()),
            });
            Told::Deny {
                message: format!("the operator did not answer in time ({why})"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What claude's side does: one question on the socket, one answer.
    async fn ask(socket: std::path::PathBuf, tool: &'static str, input: Value) -> Told {
        let conn = UnixStream::connect(&socket).await.unwrap();
        let (r, mut w) = conn.into_split();
        let q = serde_json::json!({"tool_name": tool, "input": input});
        w.write_all(format!("{q}\n").as_bytes()).await.unwrap();
        let mut line = String::new();
        BufReader::new(r).read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// A server whose attempt is this test process (it asks itself).
    fn serving(tools: ToolSet, events: AgentEvents) -> AskServer {
        let s = AskServer::start(tools, events, ".".into(), Rows::default()).unwrap();
        s.asked_by(std::process::id() as i32);
        s
    }

    fn asking(patterns: &[&str]) -> ToolSet {
        ToolSet {
            ask: patterns.iter().map(|p| p.to_string()).collect(),
            ask_timeout: Some(1),
            ..ToolSet::default()
        }
    }

    #[tokio::test]
    async fn the_policy_refuses_what_it_does_not_ask_and_the_kernel_answers_the_rest() {
        let (events, mut rx) = AgentEvents::for_test();
        let server = serving(asking(&["Bash(rm *)"]), events);
        let socket = server.socket().to_path_buf();
        // Not one to ask about: refused at once, the kernel never sees it.
        let told = ask(socket.clone(), "Bash", serde_json::json!({"command": "ls"})).await;
        assert!(
            matches!(&told, Told::Deny { message } if message.contains("neither allows it")),
            "{told:?}"
        );
        let input = serde_json::json!({"command": "rm -rf build"});
        let asked = tokio::spawn(ask(socket, "Bash", input.clone()));
        let msg = rx.recv().await.unwrap();
        let AgentEvent::Asking(q) = msg.event else {
            panic!("{:?}", msg.event);
        };
        assert_eq!(&*q.tool, "Bash(rm -rf build)");
        assert!(q.reply.answer(Answer {
            allow: true,
            why: Arc::from("allowed by ana"),
        }));
        assert_eq!(
            asked.await.unwrap(),
            Told::Allow {
                updated_input: input
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unanswered_it_is_denied_in_time_and_where_nobody_holds_it_at_once() {
        let (events, mut rx) = AgentEvents::for_test();
        let server = serving(asking(&["Write"]), events);
        let told = tokio::spawn(ask(
            server.socket().to_path_buf(),
            "Write",
            serde_json::json!({"file_path": "a"}),
        ));
        let AgentEvent::Asking(_held) = rx.recv().await.unwrap().event else {
            panic!("a question");
        };
        // Held but not answered: the ToolSet's second passes.
        let ended = rx.recv().await.unwrap();
        assert!(
            matches!(ended.event, AgentEvent::AskEnded { .. }),
            "{:?}",
            ended.event
        );
        let told = told.await.unwrap();
        assert!(
            matches!(&told, Told::Deny { message } if message.contains("did not answer in time")),
            "{told:?}"
        );
        // A worker's attempt: the question goes nowhere, denied at once.
        let server = serving(asking(&["Write"]), AgentEvents::detached());
        let t0 = std::time::Instant::now();
        let told = ask(
            server.socket().to_path_buf(),
            "Write",
            serde_json::json!({"file_path": "a"}),
        )
        .await;
        assert!(
            matches!(&told, Told::Deny { message } if message.contains("no operator can answer")),
            "{told:?}"
        );
        assert!(
            t0.elapsed() < std::time::Duration::from_millis(900),
            "at once"
        );
    }

    fn denied(told: &Told, words: &str) -> bool {
        matches!(told, Told::Deny { message } if message.contains(words))
    }

    /// Another run's agent can reach the socket (same user): a process
    /// that is not the attempt's own is refused, and nothing is asked.
    #[tokio::test]
    async fn only_the_attempts_own_processes_may_ask() {
        let (events, mut rx) = AgentEvents::for_test();
        let server = AskServer::start(asking(&["*"]), events, ".".into(), Rows::default()).unwrap();
        let socket = server.socket().to_path_buf();
        let input = serde_json::json!({"command": "ls"});
        // Before the attempt started, nobody.
        let told = ask(socket.clone(), "Bash", input.clone()).await;
        assert!(denied(&told, "has not started"), "{told:?}");
        // An attempt that is a child of ours: this process is its parent,
        // not one of its own.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        server.asked_by(child.id() as i32);
        let told = ask(socket, "Bash", input).await;
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(denied(&told, "not a process of this attempt"), "{told:?}");
        assert!(rx.try_recv().is_err(), "nothing reached the kernel");
    }

    /// A second question waits its turn: the operator sees one at a time,
    /// and the first is never dropped for it.
    #[tokio::test]
    async fn a_second_question_waits_for_the_first() {
        let (events, mut rx) = AgentEvents::for_test();
        let server = serving(asking(&["Bash"]), events);
        let socket = server.socket().to_path_buf();
        let first = tokio::spawn(ask(
            socket.clone(),
            "Bash",
            serde_json::json!({"command": "a"}),
        ));
        let AgentEvent::Asking(q1) = rx.recv().await.unwrap().event else {
            panic!("a question");
        };
        let second = tokio::spawn(ask(socket, "Bash", serde_json::json!({"command": "b"})));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(rx.try_recv().is_err(), "the second waits");
        assert!(
            !first.is_finished(),
            "the first still waits for the operator"
        );
        assert_eq!(&*q1.tool, "Bash(a)");
        q1.reply.answer(Answer {
            allow: true,
            why: Arc::from("ana"),
        });
        assert!(matches!(first.await.unwrap(), Told::Allow { .. }));
        let AgentEvent::Asking(q2) = rx.recv().await.unwrap().event else {
            panic!("the second question");
        };
        assert_eq!(&*q2.tool, "Bash(b)");
        q2.reply.answer(Answer {
            allow: false,
            why: Arc::from("no"),
        });
        assert!(denied(&second.await.unwrap(), "no"));
    }

    /// Questions count against the attempt's event bound, and no more
    /// than a few are held at once.
    #[tokio::test]
    async fn questions_are_bounded_in_number_and_memory() {
        let (events, mut rx) = AgentEvents::for_test();
        let rows = Rows::default();
        let server = AskServer::start(asking(&["Bash"]), events, ".".into(), rows.clone()).unwrap();
        server.asked_by(std::process::id() as i32);
        let socket = server.socket().to_path_buf();
        // Held open without a word: each takes a place.
        let mut held = Vec::new();
        for _ in 0..OPEN_MAX {
            held.push(UnixStream::connect(&socket).await.unwrap());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let told = ask(socket.clone(), "Bash", serde_json::json!({"command": "a"})).await;
        assert!(denied(&told, "open already"), "{told:?}");
        drop(held);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        // Past the attempt's bound: denied, never asked, and the
        // supervisor is told to stop it.
        assert!(rows.add(crate::agents::outflow::MAX_ROWS - 1));
        let told = ask(socket, "Bash", serde_json::json!({"command": "a"})).await;
        assert!(denied(&told, "more than its record holds"), "{told:?}");
        assert!(rx.try_recv().is_err());
        tokio::time::timeout(std::time::Duration::from_secs(1), rows.over())
            .await
            .expect("the supervisor hears of it");
    }

    /// A long harmless head does not carry a chain of commands past a
    /// single command's pattern: refused, never put before the operator.
    #[tokio::test]
    async fn a_pattern_decides_on_the_whole_command() {
        let (events, mut rx) = AgentEvents::for_test();
        let server = serving(asking(&["Bash(echo *)"]), events);
        let cmd = format!("echo {} ; rm -rf DIR", "a".repeat(400));
        let told = ask(
            server.socket().to_path_buf(),
            "Bash",
            serde_json::json!({"command": cmd}),
        )
        .await;
        assert!(denied(&told, "neither allows it"), "{told:?}");
        assert!(rx.try_recv().is_err());
        // A long single command is asked, and its head says it is cut.
        let cmd = format!("echo {}", "a".repeat(400));
        let asked = tokio::spawn(ask(
            server.socket().to_path_buf(),
            "Bash",
            serde_json::json!({"command": cmd}),
        ));
        let AgentEvent::Asking(q) = rx.recv().await.unwrap().event else {
            panic!("a question");
        };
        assert!(q.tool.ends_with("…) (cut)"), "{}", q.tool);
        assert!(q.detail.as_deref().is_some_and(|d| d.contains(&cmd)));
        q.reply.answer(Answer {
            allow: false,
            why: Arc::from("no"),
        });
        asked.await.unwrap();
    }
}
