//! The input side of a CLI that reads its conversation live (claude's
//! stream-json input): the prompt is the first message; what the operator
//! says while it runs follows. claude takes a message into the turn that
//! runs (after a tool's result) or, between turns, as a new turn, and
//! echoes each as it takes it; when a turn ends with every message taken,
//! stdin is closed and the CLI ends as it would have. A message that comes
//! after the input was closed is refused (the kernel's send fails), and
//! the kernel stops the attempt and continues its session with it instead.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::agents::argv::user_message;

/// What the CLI's stream told of its input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Turn {
    /// It took a message (its echo).
    Took,
    /// A turn ended (a `result` line).
    Ended,
}

pub(super) async fn input(
    mut stdin: ChildStdin,
    first: String,
    mut said: UnboundedReceiver<Arc<str>>,
    mut turns: UnboundedReceiver<Turn>,
) {
    // A CLI that exited, or closed its input, ends this: writes fail.
    if stdin.write_all(first.as_bytes()).await.is_err() {
        return;
    }
    let (mut sent, mut took) = (1u32, 0u32);
    let mut listening = true;
    loop {
        tokio::select! {
            m = said.recv(), if listening => match m {
                Some(text) => {
                    if stdin.write_all(user_message(&text).as_bytes()).await.is_err() {
                        return;
                    }
                    sent += 1;
                }
                // The kernel let go of the attempt: nothing more comes.
                None => listening = false,
            },
            t = turns.recv() => match t {
                // Its output ended: nothing reads any more.
                None => break,
                Some(Turn::Took) => took += 1,
                // A message it has not taken yet starts a turn of its own.
                // (A CLI that echoes none, not even the prompt, is taken
                // to have taken all: its input closes as it always did.)
                Some(Turn::Ended) if took > 0 && took < sent => {}
                Some(Turn::Ended) => {
                    // Every message was taken: no more are, and what came
                    // in the meantime is still said (a turn of its own).
                    said.close();
                    while let Ok(text) = said.try_recv() {
                        if stdin.write_all(user_message(&text).as_bytes()).await.is_err() {
                            return;
                        }
                        sent += 1;
                    }
                    if took == 0 || took >= sent {
                        break;
                    }
                    listening = false;
                }
            },
        }
    }
    let _ = stdin.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use tokio::io::{AsyncBufReadExt, BufReader};
    use tokio::sync::mpsc::unbounded_channel;

    use super::*;

    /// `cat` stands for the CLI: what is written to its stdin comes back
    /// on its stdout, and it exits when stdin closes.
    #[tokio::test]
    async fn messages_follow_the_prompt_and_input_closes_when_a_turn_ends_with_all_taken() {
        let mut cat = tokio::process::Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = cat.stdin.take().unwrap();
        let mut lines = BufReader::new(cat.stdout.take().unwrap()).lines();
        let (said_tx, said_rx) = unbounded_channel();
        let (turn_tx, turn_rx) = unbounded_channel();
        let task = tokio::spawn(input(stdin, user_message("the task"), said_rx, turn_rx));
        let content = |l: &str| -> String {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["message"]["content"].as_str().unwrap().to_string()
        };
        assert_eq!(
            content(&lines.next_line().await.unwrap().unwrap()),
            "the task"
        );
        turn_tx.send(Turn::Took).unwrap();
        assert!(said_tx.send(Arc::from("use the other parser")).is_ok());
        assert_eq!(
            content(&lines.next_line().await.unwrap().unwrap()),
            "use the other parser"
        );
        // A turn ends before it took the message: it stays open for it.
        turn_tx.send(Turn::Ended).unwrap();
        tokio::task::yield_now().await;
        assert!(!task.is_finished());
        turn_tx.send(Turn::Took).unwrap();
        turn_tx.send(Turn::Ended).unwrap();
        task.await.unwrap();
        assert_eq!(
            lines.next_line().await.unwrap(),
            None,
            "stdin closed: cat ended"
        );
        assert!(cat.wait().await.unwrap().success());
        assert!(
            said_tx.send(Arc::from("too late")).is_err(),
            "refused: the kernel stops it instead"
        );
    }
}
