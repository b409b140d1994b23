//! The README's reliability promises name the tests that show them; each
//! named test must exist, so a promise cannot outlive its proof.

use std::path::{Path, PathBuf};

/// Every file called `name` under `dir`, at any depth.
fn files_named(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_named(&path, name, out);
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
}

#[test]
fn every_reliability_promise_names_a_test_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## Reliability\n")
        .nth(1)
        .expect("README has a Reliability section")
        .split("\n## ")
        .next()
        .unwrap();
    let mut checked = 0;
    for row in section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ---"))
    {
        let cells: Vec<&str> = row.split(" | ").collect();
        let Some(tests) = cells.last() else { continue };
        if tests.starts_with("test") {
            continue; // the header
        }
        let mut file = None;
        for quoted in tests.split('`').skip(1).step_by(2) {
            if !quoted
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_ …".contains(c))
            {
                continue; // a command quoted in the prose, not a test
            }
            let mut words = quoted.split_whitespace();
            let (f, name) = match (words.next(), words.next()) {
                (Some(f), Some(name)) => (f.to_string(), name),
                (Some(name), None) => (file.clone().expect("a file named first"), name),
                _ => continue,
            };
            let name = name.trim_start_matches('…');
            // The file is a module of one tier, or of two where its tests
            // are split between them: `tests/<tier>/{f}.rs`.
            let mut sources = Vec::new();
            files_named(&root.join("tests"), &format!("{f}.rs"), &mut sources);
            assert!(
                !sources.is_empty(),
                "the README names {f} {name}, and no tests/…/{f}.rs exists"
            );
            assert!(
                sources.iter().any(|p| std::fs::read_to_string(p)
                    .unwrap()
                    .contains(&format!("fn {name}("))),
                "the README names {f} {name}, which {sources:?} do not define"
            );
            file = Some(f);
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} tests named");
}
