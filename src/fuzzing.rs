//! Entry points for fuzzing the readers of untrusted input: the play file,
//! the requests an agent's output carries and the agent stream parsers.
//! The fuzz targets (`fuzz/`) and the corpus replay test
//! (`tests/fast/fuzz_corpus.rs`) call the same functions. Each takes any bytes
//! and panics only when the reader panics or one of its promises breaks.

use std::path::Path;

use serde_json::{Map, Value};

use crate::agents::StreamFormat;
use crate::agents::stream::{StreamParser, Update};
use crate::kernel::request::{self, SpawnRequest};
use crate::play::{LoadError, Play};

/// Where a fuzzed play says it lives: nothing is there, so relative paths
/// in it reach no real file.
const NOWHERE: &str = "/nonexistent/playdeck-fuzz";

/// The play reader: bytes are a play, or the reason they are not, at a
/// line and column of the file. Reading it in parts (one operation at a
/// time, as large plays are) says exactly what reading it whole says.
pub fn play_reader(data: &[u8]) {
    let dir = Path::new(NOWHERE);
    match Play::from_bytes_in("fuzz.toml", data.to_vec(), dir) {
        Ok(play) => {
            let _ = play.summary();
        }
        Err(LoadError::Invalid(d)) => {
            assert!(!d.items.is_empty(), "an error with nothing to say");
            for item in &d.items {
                assert!(
                    item.span.start <= item.span.end && item.span.end <= d.source.len(),
                    "{:?} is outside the {}-byte file: {}",
                    item.span,
                    d.source.len(),
                    item.message
                );
            }
            assert_eq!(d.positions().len(), d.items.len());
            let _ = d.render(false);
        }
        Err(e) => panic!("reading bytes can fail only as invalid, not {e}"),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let split =
            crate::play::parse::parse_with("fuzz.toml", text, dir, &Default::default(), true);
        let whole =
            crate::play::parse::parse_with("fuzz.toml", text, dir, &Default::default(), false);
        assert_eq!(
            format!("{split:?}"),
            format!("{whole:?}"),
            "read in parts, the play reads otherwise"
        );
    }
}

/// Request extraction: any JSON an agent prints is searched without
/// failing; each spawn request found is read or refused with a reason, and
/// a request's identity does not depend on the order of its keys.
pub fn spawn_requests(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let found = request::extract(&v);
    for raw in &found.spawns {
        if let Err(e) = SpawnRequest::from_value(raw) {
            assert!(e.to_string().starts_with("invalid spawn request: "), "{e}");
        }
    }
    for esc in &found.escalations {
        let _ = request::escalation_reason(esc);
    }
    let reversed = reverse_keys(&v);
    assert_eq!(
        request::identity(&v),
        request::identity(&reversed),
        "key order changed the identity of {v}"
    );
    let again = request::extract(&reversed);
    assert_eq!(found.spawns.len(), again.spawns.len());
    assert_eq!(found.escalations.len(), again.escalations.len());
}

/// `v` with the keys of every object in the opposite order.
fn reverse_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, val) in m.iter().rev() {
                out.insert(k.clone(), reverse_keys(val));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(reverse_keys).collect()),
        other => other.clone(),
    }
}

/// An agent stream parser: the first byte picks the format, the rest is
/// the agent's stdout. No line fails the parser; every JSON line reaches
/// the kernel for extraction; any non-blank line counts as output.
pub fn agent_stream(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let formats = StreamFormat::ALLOWED;
    let name = formats[usize::from(pick) % formats.len()];
    let format = StreamFormat::parse(name).expect("an allowed name");
    let text = String::from_utf8_lossy(rest);
    let mut parser = StreamParser::new(format);
    let mut out = Vec::new();
    let (mut json_lines, mut blank) = (0, true);
    for line in text.split_inclusive('\n') {
        parser.feed(line, &mut out);
        if !line.trim().is_empty() {
            blank = false;
        }
        if serde_json::from_str::<Value>(line.trim()).is_ok() {
            json_lines += 1;
        }
    }
    let emitted = out.iter().filter(|u| matches!(u, Update::Emit(_))).count();
    assert!(
        emitted >= json_lines,
        "{format}: {json_lines} JSON lines, {emitted} sent for extraction"
    );
    let parsed = parser.finish();
    assert_eq!(parsed.any_output, !blank, "{format}: output seen wrongly");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_reversed_at_every_depth_and_nothing_else_moves() {
        let v = json!({"a": 1, "b": [{"c": 2, "d": 3}], "e": {"f": 4, "g": 5}});
        let r = reverse_keys(&v);
        assert_eq!(r, v, "the same content");
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"e":{"g":5,"f":4},"b":[{"d":3,"c":2}],"a":1}"#
        );
    }

    #[test]
    fn a_play_that_does_not_read_is_refused_at_a_position() {
        // Not UTF-8: refused at the byte, with the reader's own checks.
        play_reader(b"[play]\nname = \"caf\xe9\"\n");
        let refused = Play::from_bytes_in("fuzz.toml", b"[play\n".to_vec(), Path::new(NOWHERE));
        let Err(LoadError::Invalid(d)) = refused else {
            panic!("a broken table header reads")
        };
        assert_eq!(d.positions(), ["fuzz.toml:1:6"]);
    }
}
