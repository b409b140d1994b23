//! The reliability promises (`docs/reliability.md`, linked from the
//! README) name the tests that show them; each named test must exist, so a
//! promise cannot outlive its proof.

use std::path::{Path, PathBuf};

/// The heading of the section that holds the promises and their tests.
const SECTION: &str = "\n## Promises and the tests that show them\n";

/// Every file named `name` under `dir`, at any depth: a test file may sit
/// in its tier's folder (`tests/cli/headless_cli.rs`) or at the top.
fn files_named(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for p in entries.map(|e| e.unwrap().path()) {
        if p.is_dir() {
            files_named(&p, name, out);
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
}

#[test]
fn every_reliability_promise_names_a_test_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/reliability.md")).unwrap();
    let section = page
        .split(SECTION)
        .nth(1)
        .expect("docs/reliability.md has the promises' section")
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
            let mut found = Vec::new();
            files_named(&root.join("tests"), &format!("{f}.rs"), &mut found);
            assert!(
                !found.is_empty(),
                "docs/reliability.md names {f} {name}, and there is no {f}.rs under tests/"
            );
            let defined = found.iter().any(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .contains(&format!("fn {name}("))
            });
            assert!(
                defined,
                "docs/reliability.md names {f} {name}, which {} does not define",
                found
                    .iter()
                    .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            file = Some(f);
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} tests named");
}
