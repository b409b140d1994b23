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

use crate::agents::transcript::args_of;
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
    task: tokio::task::JoinHandle<()>,
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
    ) -> std::io::Result<AskServer> {
        // Short (a socket path has ~100 bytes) and private.
        let dir = tempfile::Builder::new().prefix("pd-ask-").tempdir()?;
        crate::files::private_dir(dir.path())?;
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket)?;
        let tools = Arc::new(tools);
        let ids = Arc::new(AtomicU32::new(0));
        let cwd = Arc::new(cwd);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (tools, events, ids, cwd) =
                    (tools.clone(), events.clone(), ids.clone(), cwd.clone());
                tokio::spawn(async move {
                    let _ = serve(conn, &tools, &events, &ids, &cwd).await;
                });
            }
        });
        Ok(AskServer {
            _dir: dir,
            socket,
            task,
        })
    }

    pub(super) fn socket(&self) -> &Path {
        &self.socket
    }
}

/// One question, one answer, on one connection.
async fn serve(
    conn: UnixStream,
    tools: &ToolSet,
    events: &AgentEvents,
    ids: &AtomicU32,
    cwd: &Path,
) -> std::io::Result<()> {
    use tokio::io::AsyncReadExt;
    let (r, mut w) = conn.into_split();
    let mut line = String::new();
    BufReader::new(r.take(QUESTION_MAX))
        .read_line(&mut line)
        .await?;
    let told = match serde_json::from_str::<Asked>(&line) {
        Ok(asked) => decide(asked, tools, events, ids, cwd).await,
        Err(e) => Told::Deny {
            message: format!("playdeck could not read the question: {e}"),
        },
    };
    let mut out = serde_json::to_string(&told).unwrap_or_default();
    out.push('\n');
    w.write_all(out.as_bytes()).await
}

/// The policy first, then the operator (through the kernel), within the
/// ToolSet's time.
async fn decide(
    asked: Asked,
    tools: &ToolSet,
    events: &AgentEvents,
    ids: &AtomicU32,
    cwd: &Path,
) -> Told {
    let args = args_of(Some(&asked.input));
    // What every view shows: never a control character of the agent's.
    let head = crate::printable::printable(&if args.is_empty() {
        asked.tool_name.clone()
    } else {
        format!("{}({args})", asked.tool_name)
    })
    .into_owned();
    if !tools.asks(&asked.tool_name, &args) {
        return Told::Deny {
            message: format!(
                "{head} is not allowed: the ToolSet neither allows it nor leaves it to the operator"
            ),
        };
    }
    let id = ids.fetch_add(1, Ordering::Relaxed) + 1;
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
        let server = AskServer::start(asking(&["Bash(rm *)"]), events, ".".into()).unwrap();
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
        let server = AskServer::start(asking(&["Write"]), events, ".".into()).unwrap();
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
        let server =
            AskServer::start(asking(&["Write"]), AgentEvents::detached(), ".".into()).unwrap();
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
}
