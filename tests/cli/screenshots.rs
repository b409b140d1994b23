//! Every committed screenshot must match what `playdeck screenshot` renders
//! now; when the console changes, `screenshots/regenerate.sh` updates them.
//! And each is shown: in the README or on a page under `docs/`.

use crate::common;

use std::path::Path;

#[test]
fn committed_screenshots_match_what_the_command_renders() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let list = std::fs::read_to_string(root.join("screenshots/shots.txt")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let mut stale = Vec::new();
    for line in list
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        let (name, at, size, theme, keys, play, runs) = match cols[..] {
            [name, at, size, theme, keys] => (name, at, size, theme, keys, None, None),
            [name, at, size, theme, keys, play] => (name, at, size, theme, keys, Some(play), None),
            [name, at, size, theme, keys, play, runs] => {
                (name, at, size, theme, keys, Some(play), Some(runs))
            }
            _ => panic!("bad line in shots.txt: {line}"),
        };
        let play = play.filter(|p| *p != "-");
        let keys = if keys == "-" { "" } else { keys };
        let out = dir.path().join(format!("{name}.svg"));
        let mut cmd = common::playdeck();
        cmd.arg("screenshot");
        if let Some(p) = play {
            cmd.arg(root.join(p));
        }
        if let Some(r) = runs {
            cmd.arg("--runs-dir").arg(root.join(r));
        }
        let status = cmd
            .args([
                "--at", at, "--size", size, "--theme", theme, "--keys", keys, "--out",
            ])
            .arg(&out)
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "{name}: playdeck screenshot failed");
        let now = std::fs::read(&out).unwrap();
        let committed =
            std::fs::read(root.join(format!("screenshots/{name}.svg"))).unwrap_or_default();
        if now != committed {
            stale.push(name.to_string());
        }
        checked += 1;
    }
    assert!(checked >= 9, "shots.txt lists at least nine screenshots");
    assert!(
        stale.is_empty(),
        "these screenshots no longer match the console: {stale:?}; run screenshots/regenerate.sh and look at them"
    );
}

/// The names `screenshots/shots.txt` lists.
fn listed_shots(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("screenshots/shots.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split('|').next().unwrap().trim().to_string())
        .collect()
}

#[test]
fn every_screenshot_is_shown_in_the_readme_or_the_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    // The docs pages link to the repository's screenshots/ from docs/.
    let mut docs = String::new();
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    for p in &pages {
        docs.push_str(&std::fs::read_to_string(p).unwrap());
    }
    let shots = listed_shots(root);
    assert!(
        shots.len() >= 9,
        "shots.txt lists {} screenshots",
        shots.len()
    );
    let shown = |name: &str| {
        readme.contains(&format!("](screenshots/{name}.svg)"))
            || docs.contains(&format!("](../screenshots/{name}.svg)"))
    };
    let hidden: Vec<&String> = shots.iter().filter(|n| !shown(n)).collect();
    assert!(
        hidden.is_empty(),
        "these screenshots are shown neither in the README nor in docs/*.md: {hidden:?}"
    );
    assert!(
        shots
            .iter()
            .any(|n| readme.contains(&format!("](screenshots/{n}.svg)"))),
        "the README shows no screenshot"
    );
}

#[test]
fn a_screenshot_is_the_same_bytes_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let render = |name: &str| {
        let out = dir.path().join(name);
        let ok = common::playdeck()
            .args([
                "screenshot",
                "--at",
                "17.5",
                "--size",
                "120x36",
                "--keys",
                "i down",
                "--out",
            ])
            .arg(&out)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        std::fs::read(out).unwrap()
    };
    let a = render("a.svg");
    assert!(String::from_utf8_lossy(&a).starts_with("<svg"));
    assert_eq!(a, render("b.svg"));
}
