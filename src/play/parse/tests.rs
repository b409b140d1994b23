use super::*;

/// Parsing operation by operation reports exactly what parsing the file
/// whole does: the example plays, and each of them with every line
/// removed or doubled in turn (duplicate keys, tables opened twice,
/// operations cut in half, syntax errors).
#[test]
fn a_split_parse_says_what_a_whole_parse_says() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plays");
    let agents = UserFile::default();
    let mut compared = 0;
    for name in ["demo.toml", "agents.toml", "small.toml", "invalid.toml"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        // The plays are split, or the comparison proves nothing.
        assert!(segments::split(&text).is_some_and(|s| s.operations.len() > 1));
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut variants = vec![text.clone()];
        for i in 0..lines.len() {
            let mut cut = lines.clone();
            cut.remove(i);
            variants.push(cut.concat());
            let mut twice = lines.clone();
            twice.insert(i, lines[i]);
            variants.push(twice.concat());
        }
        for v in &variants {
            let split = parse_with(name, v, &dir, &agents, true);
            let whole = parse_with(name, v, &dir, &agents, false);
            assert_eq!(format!("{split:?}"), format!("{whole:?}"), "{name}:\n{v}");
            compared += 1;
        }
    }
    assert!(compared > 900, "{compared}");
}

/// A play large enough to be read on several threads reports what the
/// whole parse does, in file order, errors from every part included.
#[test]
fn a_play_read_on_several_threads_reads_as_one() {
    use std::fmt::Write as _;
    let mut text = String::from("[play]\nname = \"big\"\n");
    for i in 0..9000 {
        let _ = write!(
            text,
            "[[operations]]\nid = \"op{i}\"\nrole = \"implementer\"\ninstruction = \"w\"\n"
        );
        match i {
            10 => text.push_str("colour = \"red\"\n"),
            5000 => text.push_str("depends_on = [\"nowhere\"]\n"),
            8999 => text.push_str("approval = \"yes\"\n"),
            _ => {}
        }
    }
    let dir = std::path::Path::new(".");
    let agents = UserFile::default();
    let split = parse_with("big.toml", &text, dir, &agents, true);
    let whole = parse_with("big.toml", &text, dir, &agents, false);
    let Err(d) = &split else {
        panic!("the errors were not found")
    };
    assert_eq!(d.items.len(), 3, "{d:?}");
    assert_eq!(format!("{split:?}"), format!("{whole:?}"));
    // And the valid play reads the same too.
    let valid: String = text
        .lines()
        .filter(|l| {
            !l.starts_with("colour") && !l.starts_with("depends_on") && !l.starts_with("approval")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let split = parse_with("big.toml", &valid, dir, &agents, true);
    assert!(split.as_ref().is_ok_and(|p| p.operations.len() == 9000));
    let whole = parse_with("big.toml", &valid, dir, &agents, false);
    assert_eq!(format!("{split:?}"), format!("{whole:?}"));
}

/// What an attached console reads of a run's play — its sections,
/// without the operations — says what the whole play says of them.
#[test]
fn a_plays_sections_read_alone_say_what_the_whole_play_says() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plays");
    for name in [
        "demo.toml",
        "agents.toml",
        "budget.toml",
        "gates.toml",
        "small.toml",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let whole = parse(name, &text, &dir, &UserFile::default()).unwrap();
        let cut = Play::sections_of(&text);
        assert!(
            !cut.contains("[[operations]]"),
            "{name}: the operations are left out"
        );
        let alone = parse_sections(name, &cut, &dir).unwrap();
        assert!(alone.operations.is_empty());
        assert_eq!(
            format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {}",
                alone.palette,
                alone.capacity,
                alone.agents,
                alone.budget,
                alone.notify,
                alone.retry,
                alone.name
            ),
            format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {}",
                whole.palette,
                whole.capacity,
                whole.agents,
                whole.budget,
                whole.notify,
                whole.retry,
                whole.name
            ),
            "{name}"
        );
    }
}
