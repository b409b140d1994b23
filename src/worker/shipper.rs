//! An attempt's logs sent to its run as they grow.

use super::*;

/// Sends what an attempt writes to its logs, as it grows: whole lines
/// while it runs, the rest at the end.
pub(super) struct Shipper {
    command: PathBuf,
    sent_command: bool,
    files: [(PathBuf, u64); 2],
}

impl Shipper {
    pub(super) fn new(dir: &std::path::Path, name: &str, attempt: u32) -> Self {
        let base = format!("{name}.{attempt}");
        Shipper {
            command: dir.join(format!("{base}.command.json")),
            sent_command: false,
            files: [
                (dir.join(format!("{base}.stdout.log")), 0),
                (dir.join(format!("{base}.stderr.log")), 0),
            ],
        }
    }

    pub(super) async fn ship(&mut self, w: &Worker, out: &str, last: bool) {
        if !self.sent_command
            && let Ok(text) = std::fs::read(&self.command)
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text)
        {
            self.sent_command = true;
            let argv = v["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            w.send(out, &Frame::Command { argv }, false).await;
        }
        for (i, (path, at)) in self.files.iter_mut().enumerate() {
            let Some(chunk) = read_from(path, *at, last) else {
                continue;
            };
            *at += chunk.len() as u64;
            // Frames stay well under the server's 1 MiB message limit.
            for piece in chunk.chunks(256 << 10) {
                let text = String::from_utf8_lossy(piece).into_owned();
                w.send(
                    out,
                    &Frame::Output {
                        stderr: i == 1,
                        text,
                    },
                    false,
                )
                .await;
            }
        }
    }
}

/// What `path` holds past `at`: up to its last newline, or all of it when
/// `last`.
pub(super) fn read_from(path: &std::path::Path, at: u64, last: bool) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(SeekFrom::Start(at)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    if !last {
        let end = buf.iter().rposition(|&b| b == b'\n')? + 1;
        buf.truncate(end);
    }
    (!buf.is_empty()).then_some(buf)
}
