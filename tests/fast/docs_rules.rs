//! A test named `rule_<family>_<NN>_…` checks one rule of a design record;
//! the rule must be in the record's summary under `docs/contracts/`, so a
//! test cannot point at a rule the docs do not have.

use std::path::{Path, PathBuf};

/// The name families tests use, and how the docs write their rule ids.
const FAMILIES: &[(&str, &str)] = &[
    ("a33", "A33"),
    ("a36", "A36"),
    ("f11", "F11"),
    ("rpc", "RPC"),
];

/// Every `.rs` file under `dir`, in a stable order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(family, number, test name)` of each `fn rule_<family>_<NN>_…` in
/// `source`. Names without a number (`rule_a33_inject_…`) name no rule.
fn rule_tests(source: &str) -> Vec<(String, u32, String)> {
    const MARK: &str = "fn rule_";
    let mut found = Vec::new();
    for (at, _) in source.match_indices(MARK) {
        let rest = &source[at + MARK.len()..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        let mut parts = name.splitn(3, '_');
        let (Some(family), Some(number)) = (parts.next(), parts.next()) else {
            continue;
        };
        if family.is_empty() || number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        found.push((
            family.to_string(),
            number.parse().unwrap(),
            format!("rule_{name}"),
        ));
    }
    found
}

/// Whether some table row of `docs` defines `id` (`| A33-12 | …`): a
/// mention in prose does not count.
fn defines(docs: &str, id: &str) -> bool {
    let row = format!("| {id} |");
    docs.lines().any(|l| l.starts_with(&row))
}

#[test]
fn every_rule_a_test_names_is_in_the_contract_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = String::new();
    let mut contracts: Vec<PathBuf> = std::fs::read_dir(root.join("docs/contracts"))
        .expect("docs/contracts exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    contracts.sort();
    for p in &contracts {
        docs.push_str(&std::fs::read_to_string(p).unwrap());
        docs.push('\n');
    }

    let mut files = Vec::new();
    rust_files(&root.join("tests"), &mut files);
    rust_files(&root.join("src"), &mut files);
    let mut checked = 0;
    let mut missing = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(root).unwrap_or(file).display();
        for (family, number, test) in rule_tests(&source) {
            let Some((_, prefix)) = FAMILIES.iter().find(|(f, _)| *f == family) else {
                missing.push(format!(
                    "{shown} {test}: family {family:?} is none of {:?}; add it to FAMILIES and its record to docs/contracts/",
                    FAMILIES.iter().map(|(f, _)| *f).collect::<Vec<_>>()
                ));
                continue;
            };
            let id = format!("{prefix}-{number:02}");
            if !defines(&docs, &id) {
                missing.push(format!("{shown} {test}: no rule {id} in docs/contracts/"));
            }
            checked += 1;
        }
    }
    assert!(
        missing.is_empty(),
        "tests name rules the docs do not define:\n{}",
        missing.join("\n")
    );
    assert!(checked >= 30, "only {checked} rule tests found");
}

/// Every `path.rs::name` the docs give as the code that shows something
/// (`tests/cli/palette.rs::each_palette_rule_…`, `src/palette/catalog.rs::
/// canonical_names`) is a file that defines `fn name`: a file that moved
/// or a test renamed leaves no reference behind.
#[test]
fn every_test_the_docs_point_at_is_where_they_say() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for p in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                pages.push(p);
            }
        }
    }
    pages.sort();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (at, _) in text.match_indices(".rs::") {
            let start = text[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_/.-".contains(c)))
                .map_or(0, |i| i + 1);
            let path = &text[start..at + 3];
            if !(path.starts_with("tests/") || path.starts_with("src/")) {
                continue;
            }
            let rest = &text[at + 5..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let shown = page.strip_prefix(root).unwrap_or(page).display();
            match std::fs::read_to_string(root.join(path)) {
                Err(_) => wrong.push(format!("{shown}: {path} does not exist")),
                Ok(source) if !source.contains(&format!("fn {name}(")) => {
                    wrong.push(format!("{shown}: {path} defines no fn {name}"));
                }
                Ok(_) => checked += 1,
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the docs point at code that is not there:\n{}",
        wrong.join("\n")
    );
    assert!(checked >= 100, "only {checked} references checked");
}
