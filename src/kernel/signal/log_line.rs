//! The event log's line formats. A signal is one JSON object per line in
//! either of two versions, told apart by each line's `"v"`:
//!
//! - **v1, whole.** Every node signal repeats the operation's header
//!   (`op_id`, `name`, `parent_id`, `depends_on`). The headless printer's
//!   stdout, `playdeck ctl RUN events` and logs written before the compact
//!   form use it; it is what `serde_json` makes of a [`Signal`] anywhere
//!   outside [`LineEncoder`].
//! - **v2, compact** (`events.jsonl` since playdeck wrote it). A node
//!   signal names its operation by `"i"`, the operation's position in the
//!   run, once a line of the same process introduced it: the introducing
//!   line (normally `queued`) carries `"i"` and the whole header, with
//!   `parent_id` left out when null and `depends_on` when empty. Fields
//!   left out at their usual value: `elapsed` when it equals the line
//!   before's, `result` of `completed` when null, `approval` of `queued`
//!   when false, `attempt` of `started` when 1.
//!
//! A v2 line is read with the lines before it: [`LineDecoder`] keeps what
//! they introduced. Every reader of a log goes through it, and turns a line
//! back into the same [`Signal`] the run had (so a v2 line re-serialised
//! outside an encoder is the v1 line it stands for). The encoder and the
//! decoder reach the serde code of [`NodeHeader`] and [`Signal`] through a
//! thread-local, set only while one line is being written or read, so
//! signals stay plain data everywhere else.

use std::cell::RefCell;
use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{NodeHeader, Signal, SignalKind};
use crate::kernel::graph::OpId;

/// The version of a whole line.
pub const WHOLE: u32 = 1;
/// The version of a compact line.
pub const COMPACT: u32 = 2;
/// A header that no position names (built outside a run's graph).
pub const NO_POS: u32 = u32::MAX;
/// How far past the positions known so far a line may introduce one:
/// introductions come nearly in order, and a damaged number must not make
/// a reader allocate without end.
const MAX_POSITION_GAP: usize = 1 << 24;

#[derive(Default)]
struct Encoding {
    /// Positions introduced by this process's lines, as bits.
    introduced: Vec<u64>,
    /// The line being written leaves `elapsed` out.
    elide_elapsed: bool,
}

impl Encoding {
    fn forget(&mut self, pos: u32) {
        if let Some(w) = self.introduced.get_mut((pos / 64) as usize) {
            *w &= !(1u64 << (pos % 64));
        }
    }
}

#[derive(Default)]
struct Decoding {
    headers: Vec<Option<NodeHeader>>,
    last_elapsed: f64,
    /// Reading from the middle of a log: an operation introduced before
    /// is named `#i` (nil id) rather than refused.
    lenient: bool,
}

thread_local! {
    static ENCODING: RefCell<Option<Encoding>> = const { RefCell::new(None) };
    static DECODING: RefCell<Option<Decoding>> = const { RefCell::new(None) };
}

/// Writes signals as compact (v2) lines, remembering what its lines have
/// introduced. One per log writer; a process that appends to a log starts
/// a new one (its first line of each operation introduces it again).
#[derive(Default)]
pub struct LineEncoder {
    state: Encoding,
    last_elapsed: Option<u64>,
}

impl LineEncoder {
    pub fn new() -> LineEncoder {
        LineEncoder::default()
    }

    /// Appends `s` as one compact line (with its newline) to `out`.
    pub fn write(&mut self, s: &Signal, out: &mut Vec<u8>) -> serde_json::Result<()> {
        // What can change an operation's header (new dependencies, a new
        // queueing) writes it whole again, and readers learn it anew.
        if let SignalKind::Queued { node, .. } | SignalKind::DependenciesAdded { node, .. } =
            &s.kind
        {
            self.state.forget(node.pos);
        }
        let bits = s.elapsed.to_bits();
        self.state.elide_elapsed = self.last_elapsed == Some(bits);
        self.last_elapsed = Some(bits);
        ENCODING.with(|c| *c.borrow_mut() = Some(std::mem::take(&mut self.state)));
        let r = serde_json::to_writer(&mut *out, s);
        self.state = ENCODING.with(|c| c.borrow_mut().take()).unwrap_or_default();
        out.push(b'\n');
        r
    }
}

/// Reads log lines of either version, in order, into signals.
#[derive(Default)]
pub struct LineDecoder {
    state: Decoding,
}

impl LineDecoder {
    pub fn new() -> LineDecoder {
        LineDecoder::default()
    }

    /// A decoder for the lines after a point whose operations are known
    /// (a checkpoint's): `(position, header)` of each.
    pub fn knowing(known: impl Iterator<Item = (u32, NodeHeader)>, elapsed: f64) -> LineDecoder {
        let mut d = LineDecoder::new();
        for (pos, h) in known {
            d.state.learn(pos, h);
        }
        d.state.last_elapsed = elapsed;
        d
    }

    /// A decoder for lines from the middle of a log (the runs list reads
    /// its end): an operation introduced earlier is named `#i` with a nil
    /// id, and `elapsed` is NaN until a line names it.
    pub fn from_the_middle() -> LineDecoder {
        LineDecoder {
            state: Decoding {
                lenient: true,
                last_elapsed: f64::NAN,
                ..Decoding::default()
            },
        }
    }

    /// A decoder for the lines that follow `signals` (read from the same
    /// log before).
    pub fn after(signals: &[Signal]) -> LineDecoder {
        let known = signals
            .iter()
            .filter_map(|s| s.kind.node())
            .filter(|h| h.pos != NO_POS)
            .map(|h| (h.pos, h.clone()));
        LineDecoder::knowing(known, signals.last().map_or(0.0, |s| s.elapsed))
    }

    /// One line (without its newline) as a signal.
    pub fn decode(&mut self, line: &[u8]) -> serde_json::Result<Signal> {
        DECODING.with(|c| *c.borrow_mut() = Some(std::mem::take(&mut self.state)));
        let r = serde_json::from_slice::<Signal>(line);
        self.state = DECODING.with(|c| c.borrow_mut().take()).unwrap_or_default();
        r.map(|mut s| {
            self.state.last_elapsed = s.elapsed;
            // What the line stands for: the whole signal.
            s.v = WHOLE;
            s
        })
    }

    /// The line as its whole (v1) JSON, for a reader of JSON values.
    pub fn whole_value(&mut self, line: &[u8]) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(self.decode(line)?)
    }
}

impl Decoding {
    /// Keeps `h` as what position `pos` names; `false` for a position no
    /// log holds (a damaged line asking for memory without end).
    fn learn(&mut self, pos: u32, h: NodeHeader) -> bool {
        let i = pos as usize;
        if pos == NO_POS || i > self.headers.len() + MAX_POSITION_GAP {
            return false;
        }
        if self.headers.len() <= i {
            self.headers.resize(i + 1, None);
        }
        self.headers[i] = Some(h);
        true
    }
}

/// `"v"` as the line being written has it.
pub(super) fn version<S: Serializer>(_v: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u32(if compact() { COMPACT } else { WHOLE })
}

/// Whether the line being written leaves `elapsed` out.
pub(super) fn elapsed_elided(_e: &f64) -> bool {
    ENCODING.with(|c| c.borrow().as_ref().is_some_and(|e| e.elide_elapsed))
}

/// A line without `elapsed`: the line before's.
pub(super) fn elapsed_before() -> f64 {
    DECODING.with(|c| c.borrow().as_ref().map_or(0.0, |d| d.last_elapsed))
}

fn compact() -> bool {
    ENCODING.with(|c| c.borrow().is_some())
}

/// A null result a compact line leaves out.
pub(super) fn null_left_out(v: &Arc<serde_json::Value>) -> bool {
    v.is_null() && compact()
}

/// A `false` a compact line leaves out.
pub(super) fn false_left_out(b: &bool) -> bool {
    !*b && compact()
}

/// A first attempt a compact line leaves out.
pub(super) fn first_left_out(a: &u32) -> bool {
    *a == 1 && compact()
}

pub(super) fn first() -> u32 {
    1
}

impl Serialize for NodeHeader {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // None: a whole line; Some(true): introduced before; Some(false):
        // introduced by this line.
        let known = ENCODING.with(|c| {
            let mut c = c.borrow_mut();
            let e = c.as_mut()?;
            if self.pos == NO_POS {
                return Some(false);
            }
            let (word, bit) = ((self.pos / 64) as usize, 1u64 << (self.pos % 64));
            if e.introduced.len() <= word {
                e.introduced.resize(word + 1, 0);
            }
            let was = e.introduced[word] & bit != 0;
            e.introduced[word] |= bit;
            Some(was)
        });
        let mut m = s.serialize_map(None)?;
        match known {
            None => {
                m.serialize_entry("op_id", &self.op_id)?;
                m.serialize_entry("name", &self.name)?;
                m.serialize_entry("parent_id", &self.parent_id)?;
                m.serialize_entry("depends_on", &self.depends_on)?;
            }
            Some(true) => m.serialize_entry("i", &self.pos)?,
            Some(false) => {
                if self.pos != NO_POS {
                    m.serialize_entry("i", &self.pos)?;
                }
                m.serialize_entry("op_id", &self.op_id)?;
                m.serialize_entry("name", &self.name)?;
                if self.parent_id.is_some() {
                    m.serialize_entry("parent_id", &self.parent_id)?;
                }
                if !self.depends_on.is_empty() {
                    m.serialize_entry("depends_on", &self.depends_on)?;
                }
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for NodeHeader {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            op_id: Option<OpId>,
            name: Option<Arc<str>>,
            #[serde(default)]
            parent_id: Option<OpId>,
            depends_on: Option<Arc<[OpId]>>,
            i: Option<u32>,
        }
        let w = Wire::deserialize(d)?;
        match (w.op_id, w.i) {
            (Some(op_id), i) => {
                let h = NodeHeader {
                    op_id,
                    name: w.name.ok_or_else(|| D::Error::missing_field("name"))?,
                    parent_id: w.parent_id,
                    depends_on: w.depends_on.unwrap_or_else(|| Arc::from(Vec::new())),
                    pos: i.unwrap_or(NO_POS),
                };
                let learnt = i.is_none_or(|pos| {
                    DECODING.with(|c| match c.borrow_mut().as_mut() {
                        Some(dec) => dec.learn(pos, h.clone()),
                        None => true,
                    })
                });
                if !learnt {
                    return Err(D::Error::custom(format!(
                        "the line introduces operation position i={}, which no log holds",
                        h.pos
                    )));
                }
                Ok(h)
            }
            (None, Some(pos)) => DECODING
                .with(|c| {
                    let c = c.borrow();
                    let d = c.as_ref()?;
                    match d.headers.get(pos as usize).cloned().flatten() {
                        Some(h) => Some(h),
                        None if d.lenient => Some(NodeHeader {
                            op_id: OpId::nil(),
                            name: Arc::from(format!("#{pos}")),
                            parent_id: None,
                            depends_on: Arc::from(Vec::new()),
                            pos,
                        }),
                        None => None,
                    }
                })
                .map(|h| NodeHeader { pos, ..h })
                .ok_or_else(|| {
                    D::Error::custom(format!(
                        "the line names operation i={pos}, which no line before it introduced (a compact line is read with the lines before it)"
                    ))
                }),
            (None, None) => Err(D::Error::missing_field("op_id")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::signal::SignalKind;

    fn header(pos: u32) -> NodeHeader {
        NodeHeader {
            op_id: uuid::Uuid::from_u128(u128::from(pos) + 1),
            name: Arc::from(format!("op-{pos}")),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
            pos,
        }
    }

    fn sig(seq: u64, elapsed: f64, kind: SignalKind) -> Signal {
        Signal {
            v: 1,
            seq,
            elapsed,
            kind,
        }
    }

    fn lines() -> Vec<Signal> {
        let mut dep = header(1);
        dep.depends_on = Arc::from(vec![header(0).op_id]);
        vec![
            sig(
                1,
                0.0,
                SignalKind::Queued {
                    node: header(0),
                    role: Some("impl".into()),
                    instruction: "w".into(),
                    approval: false,
                },
            ),
            sig(
                2,
                0.0,
                SignalKind::Queued {
                    node: dep.clone(),
                    role: None,
                    instruction: "x".into(),
                    approval: true,
                },
            ),
            sig(
                3,
                0.5,
                SignalKind::Started {
                    node: header(0),
                    attempt: 1,
                    role: Some("impl".into()),
                    instance: None,
                },
            ),
            sig(
                4,
                0.5,
                SignalKind::Completed {
                    node: header(0),
                    result: Arc::new(serde_json::Value::Null),
                },
            ),
            sig(
                5,
                0.75,
                SignalKind::Started {
                    node: dep,
                    attempt: 2,
                    role: None,
                    instance: None,
                },
            ),
        ]
    }

    #[test]
    fn compact_lines_name_an_operation_once_and_read_back_whole() {
        let mut enc = LineEncoder::new();
        let mut out = Vec::new();
        for s in lines() {
            enc.write(&s, &mut out).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(
            got[0],
            r#"{"v":2,"seq":1,"elapsed":0.0,"type":"queued","i":0,"op_id":"00000000-0000-0000-0000-000000000001","name":"op-0","role":"impl","instruction":"w"}"#
        );
        assert_eq!(
            got[1],
            r#"{"v":2,"seq":2,"type":"queued","i":1,"op_id":"00000000-0000-0000-0000-000000000002","name":"op-1","depends_on":["00000000-0000-0000-0000-000000000001"],"role":null,"instruction":"x","approval":true}"#
        );
        assert_eq!(
            got[2],
            r#"{"v":2,"seq":3,"elapsed":0.5,"type":"started","i":0,"role":"impl"}"#
        );
        assert_eq!(got[3], r#"{"v":2,"seq":4,"type":"completed","i":0}"#);
        assert_eq!(
            got[4],
            r#"{"v":2,"seq":5,"elapsed":0.75,"type":"started","i":1,"attempt":2,"role":null}"#
        );
        let mut dec = LineDecoder::new();
        for (line, want) in got.iter().zip(lines()) {
            let s = dec.decode(line.as_bytes()).unwrap();
            assert_eq!(s, want);
            // Outside an encoder it is the whole line again.
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                serde_json::to_string(&want).unwrap()
            );
        }
    }

    #[test]
    fn a_compact_line_read_without_its_introduction_says_so() {
        let mut dec = LineDecoder::new();
        let err = dec
            .decode(br#"{"v":2,"seq":4,"elapsed":1.0,"type":"completed","i":7}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("operation i=7, which no line before it"),
            "{err}"
        );
        // Known from a checkpoint, it reads.
        let mut dec = LineDecoder::knowing([(7, header(7))].into_iter(), 0.25);
        let s = dec
            .decode(br#"{"v":2,"seq":4,"type":"completed","i":7}"#)
            .unwrap();
        assert_eq!(
            (s.kind.node().unwrap().name.as_ref(), s.elapsed),
            ("op-7", 0.25)
        );
    }

    /// An operation whose header changes (dependencies added) is written
    /// whole again, and read with its new dependencies.
    #[test]
    fn a_changed_header_is_written_whole_again() {
        let mut enc = LineEncoder::new();
        let mut out = Vec::new();
        let first = lines().remove(0);
        enc.write(&first, &mut out).unwrap();
        let mut more = header(0);
        more.depends_on = Arc::from(vec![header(5).op_id]);
        let added = sig(
            2,
            0.0,
            SignalKind::DependenciesAdded {
                node: more.clone(),
                edges: Vec::new(),
                emitter_id: None,
                operator: true,
            },
        );
        enc.write(&added, &mut out).unwrap();
        let started = sig(
            3,
            0.0,
            SignalKind::Started {
                node: more.clone(),
                attempt: 1,
                role: None,
                instance: None,
            },
        );
        enc.write(&started, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let got: Vec<&str> = text.lines().collect();
        assert!(got[1].contains(r#""depends_on":["#), "{}", got[1]);
        assert!(!got[2].contains("op_id"), "{}", got[2]);
        let mut dec = LineDecoder::new();
        let read: Vec<Signal> = got
            .iter()
            .map(|l| dec.decode(l.as_bytes()).unwrap())
            .collect();
        assert_eq!(read[1], added);
        assert_eq!(read[2], started, "the later line names the new header");
    }

    /// A damaged position does not make a reader allocate without end.
    #[test]
    fn a_position_no_log_holds_is_refused() {
        let mut dec = LineDecoder::new();
        let err = dec
            .decode(br#"{"v":2,"seq":1,"elapsed":0.0,"type":"unheld","i":4000000000,"op_id":"00000000-0000-0000-0000-000000000001","name":"a"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("position i=4000000000, which no log holds"),
            "{err}"
        );
    }

    #[test]
    fn whole_lines_still_read() {
        let mut dec = LineDecoder::new();
        let s = dec
            .decode(br#"{"v":1,"seq":3,"elapsed":1.5,"type":"started","op_id":"00000000-0000-0000-0000-000000000000","name":"build","parent_id":null,"depends_on":[],"attempt":1,"role":"implementer"}"#)
            .unwrap();
        assert_eq!(s.kind.node().unwrap().name.as_ref(), "build");
    }
}
