//! Control lines on stdin: read one at a time, bounded, and applied as the
//! control socket's requests are.

use super::*;

/// Longest control line read from stdin; longer ones are dropped whole
/// (with a message), so what a pipe sends cannot grow memory.
pub const MAX_CONTROL_LINE: usize = crate::control::MAX_REQUEST;

/// The next control line of `input`, without its newline; `None` at the
/// end. A line over [`MAX_CONTROL_LINE`] is skipped to its end and an
/// empty line given in its place.
pub fn read_control_line(input: &mut impl std::io::BufRead) -> Option<String> {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    match input
        .by_ref()
        .take(MAX_CONTROL_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
    {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    if line.len() > MAX_CONTROL_LINE && line.last() != Some(&b'\n') {
        eprintln_to(&format!(
            "a control line longer than {} KiB was ignored",
            MAX_CONTROL_LINE / 1024
        ));
        // Skip the rest of it, a bounded piece at a time.
        loop {
            let buf = match input.fill_buf() {
                Ok([]) | Err(_) => return None,
                Ok(b) => b,
            };
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    input.consume(i + 1);
                    return Some(String::new());
                }
                None => {
                    let n = buf.len();
                    input.consume(n);
                }
            }
        }
    }
    Some(String::from_utf8_lossy(&line).trim_end().to_string())
}

/// A control line that was not carried out: it did not parse, or the run
/// refused the command it named.
#[derive(Debug, thiserror::Error)]
pub enum ControlLineError {
    #[error(transparent)]
    Parse(#[from] crate::kernel::CommandError),
    #[error("{command}: {}", .failure.message)]
    Refused {
        command: &'static str,
        failure: crate::control::Failure,
    },
}

/// Applies one control line (the `playdeck ctl` grammar). Errors say what
/// was wrong and what is allowed; answers that carry information (status,
/// release) are returned as one line.
pub async fn apply_control_line(
    h: &RunHandle,
    capacity: Option<&crate::capacity::Reconciler>,
    line: &str,
) -> Result<Option<String>, ControlLineError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let req: Request = line.parse()?;
    let command = req.name();
    let by = Arc::from(crate::paths::me("stdin"));
    match crate::control::apply(h, capacity, req.clone(), by).await {
        // A decision made without a basis says what it was made on.
        Ok(crate::control::Reply::Done(a @ crate::kernel::Answer::Decided { .. })) => {
            Ok(Some(req.done_message(&a)))
        }
        Ok(crate::control::Reply::Done(_)) => Ok(None),
        Ok(reply) => Ok(Some(reply.one_line(&req))),
        Err(failure) => Err(ControlLineError::Refused { command, failure }),
    }
}
