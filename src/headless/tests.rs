use super::*;
use crate::kernel::WorkerSeen;

fn workers(list: &[(&str, usize, f64, bool)]) -> Signal {
    Signal {
        v: 1,
        seq: 1,
        elapsed: 2.0,
        kind: SignalKind::Workers {
            workers: list
                .iter()
                .map(|&(id, busy, beat_age, draining)| WorkerSeen {
                    id: id.into(),
                    host: "h".into(),
                    slots: 2,
                    busy,
                    tags: Vec::new(),
                    beat_age,
                    draining,
                })
                .collect(),
        },
    }
}

#[test]
fn a_workers_line_when_one_joins_leaves_goes_silent_or_drains_only() {
    let mut p = HumanPrinter::default();
    let line = p.line(&workers(&[("a-1", 1, 0.1, false)])).unwrap();
    assert!(
        line.ends_with("workers            1 · busy 1/2: a-1 1/2"),
        "{line:?}"
    );
    // Its load moved: nothing to say.
    assert_eq!(p.line(&workers(&[("a-1", 2, 0.1, false)])), None);
    let line = p.line(&workers(&[("a-1", 2, 0.1, true)])).unwrap();
    assert!(line.ends_with("a-1 2/2 (draining)"), "{line:?}");
    let line = p.line(&workers(&[("a-1", 2, 7.0, true)])).unwrap();
    assert!(line.ends_with("a-1 2/2 (silent 7s)"), "{line:?}");
    let line = p.line(&workers(&[])).unwrap();
    assert!(
        line.ends_with("workers            0 · busy 0/0"),
        "{line:?}"
    );
}
