//! The crate's layers, lowest first, and the test that keeps every import
//! pointing down: a module may use only modules on lower layers (not its
//! neighbours on its own layer, so siblings stay independent). What a
//! module names as `crate::x` (or, in the binary, `playdeck::x`) is an
//! import; comments are not. `docs/architecture.md` explains each layer.

/// Top-level modules by layer, lowest first. The binary is the top: its
/// command line (`cli.rs`), its commands (`cmd/`) and `main.rs`.
pub const LAYERS: &[&[&str]] = &[
    &["vocab", "printable", "paths", "files", "gitguard"],
    &["kernel"],
    &["agents", "palette", "capacity"],
    &["projection"],
    &["store"],
    &["cluster"],
    &["play"],
    &["control", "land"],
    &["session"],
    &["operator"],
    &["headless", "worker", "host", "inspect", "fuzzing", "web"],
    &["console"],
    &["cli"],
    &["cmd"],
    &["main"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The code of `source` without its comments (line comments, doc comments
/// included; string literals are kept whole, so `"//"` in one stays).
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let mut in_str = false;
        let mut prev = '\0';
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            match c {
                '"' if prev != '\\' => in_str = !in_str,
                '/' if !in_str && prev == '/' => {
                    cut = i - 1;
                    break;
                }
                _ => {}
            }
            prev = if prev == '\\' && c == '\\' { '\0' } else { c };
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// The top-level modules `code` names through `crate::` or `playdeck::`,
/// grouped imports (`crate::{a::X, b}`) included.
fn named_modules(code: &str) -> Vec<String> {
    named_after(code, &["crate::", "playdeck::"])
}

/// The first path segment after each of `roots` in `code` (`crate::x`,
/// `crate::{x::Y, z}`), when the root is not the tail of a longer name.
fn named_after(code: &str, roots: &[&str]) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for &root in roots {
        for (at, _) in code.match_indices(root) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue; // `my_crate::` or `a::super::`, not the root itself
            }
            let rest = &code[at + root.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0usize;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            found.push(ident(&group[start..i]));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            found.push(ident(&group[start..i]));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            } else {
                found.push(ident(rest));
            }
        }
    }
    found.retain(|m| !m.is_empty());
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn every_import_points_down_a_layer() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        let mut wrong = Vec::new();
        for file in &files {
            let rel = file.strip_prefix(&src).unwrap();
            let first = rel.components().next().unwrap().as_os_str();
            let module = first.to_str().unwrap().trim_end_matches(".rs");
            if module == "lib" || module == "layers" {
                continue;
            }
            let Some(own) = layer_of(module) else {
                panic!(
                    "src/{} is in no layer: add `{module}` to LAYERS in src/layers.rs",
                    rel.display()
                );
            };
            let code = without_comments(&std::fs::read_to_string(file).unwrap());
            for named in named_modules(&code) {
                if named == module {
                    continue;
                }
                match layer_of(&named) {
                    Some(l) if l < own => {}
                    Some(l) => wrong.push(format!(
                        "src/{} ({module}, layer {own}) imports {named} (layer {l})",
                        rel.display()
                    )),
                    None => {} // an item of lib.rs, or a macro's path
                }
            }
        }
        wrong.sort();
        wrong.dedup();
        assert!(
            wrong.is_empty(),
            "imports that do not point down:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn the_import_reader_sees_every_form() {
        let code = without_comments(
            "use crate::kernel::Run;\n\
             use crate::{store::RunDir, play::{Play, LoadError}};\n\
             let x = playdeck::console::run(); // crate::session in a comment\n\
             let s = \"// not a comment\"; crate::cluster::wire::x();\n\
             my_crate::nothing();\n",
        );
        let mut named = named_modules(&code);
        named.sort();
        assert_eq!(named, ["cluster", "console", "kernel", "play", "store"]);
    }

    #[test]
    fn an_upward_import_is_seen_as_one() {
        // What the test above the files would report for a kernel file
        // that reached up to the console.
        let named = named_modules(&without_comments("use crate::console::text::fit;"));
        let (k, c) = (layer_of("kernel").unwrap(), layer_of(&named[0]).unwrap());
        assert!(c > k);
    }

    /// The files of a module's parts (`src/console/app/…` is `app` of
    /// `console`) import one another one way only: no part reaches back
    /// to one that imports it, directly or through others. Test code is
    /// left out (a part's tests may use its neighbours).
    #[test]
    fn the_parts_of_a_module_import_each_other_one_way() {
        use std::collections::{BTreeMap, BTreeSet};
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        // (module, part) -> parts of the same module it names
        let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let rel = file.strip_prefix(&src).unwrap();
            let parts: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap()).collect();
            if parts.len() < 2 || parts.last() == Some(&"tests.rs") {
                continue;
            }
            let top = parts[0];
            let part = parts[1].trim_end_matches(".rs");
            if part == "mod" {
                continue; // the module's root names its parts to declare them
            }
            let code = without_comments(&std::fs::read_to_string(file).unwrap());
            let code = code.split("#[cfg(test)]").next().unwrap_or_default();
            // `super::` names a sibling only in a file directly under the
            // module: `src/top/part.rs` or `src/top/part/mod.rs`.
            let direct = parts.len() == 2 || (parts.len() == 3 && parts[2] == "mod.rs");
            let in_crate = format!("crate::{top}::");
            let mut roots = vec![in_crate.as_str()];
            if direct {
                roots.push("super::");
            }
            for named in named_after(code, &roots) {
                let is_part = src.join(top).join(format!("{named}.rs")).is_file()
                    || src.join(top).join(&named).is_dir();
                if named != part && is_part {
                    edges
                        .entry((top.to_string(), part.to_string()))
                        .or_default()
                        .insert(named);
                }
            }
        }
        // A cycle is a path back to where it started.
        let mut cycles = Vec::new();
        for (top, start) in edges.keys() {
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((at, path)) = stack.pop() {
                for next in edges.get(&(top.clone(), at.clone())).into_iter().flatten() {
                    if next == start {
                        let mut p = path.clone();
                        p.push(next.clone());
                        cycles.push(format!("{top}: {}", p.join(" -> ")));
                    } else if seen.insert(next.clone()) {
                        let mut p = path.clone();
                        p.push(next.clone());
                        stack.push((next.clone(), p));
                    }
                }
            }
        }
        assert!(
            cycles.is_empty(),
            "parts of a module importing each other:\n{}",
            cycles.join("\n")
        );
    }

    #[test]
    fn a_part_naming_its_sibling_through_super_is_seen() {
        let named = named_after(
            &without_comments("use super::app::App; x::super::no;"),
            &["super::"],
        );
        assert_eq!(named, ["app"]);
    }
}
