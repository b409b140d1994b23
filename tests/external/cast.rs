//! `playdeck replay --cast` played by asciinema itself (issue 42): the
//! recording is what its player reads, and what it prints, in a terminal
//! emulator, is the console at the run's end. asciinema comes from PyPI
//! (`tests/cast/install.sh`, into target/asciinema); without it this says
//! so and skips.

use crate::common;
use std::path::Path;
use std::process::Command;

fn asciinema() -> Option<Command> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/asciinema");
    if !dir.join("asciinema").is_dir() {
        println!(
            "skipped: no asciinema under target/asciinema (tests/cast/install.sh installs it)"
        );
        return None;
    }
    let mut c = Command::new("python3");
    c.env("PYTHONPATH", &dir).args(["-m", "asciinema"]);
    Some(c)
}

#[test]
fn a_cast_plays_in_asciinema_and_ends_on_the_runs_end() {
    let Some(mut player) = asciinema() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("gates.toml"),
        include_str!("../../examples/plays/gates.toml"),
    )
    .unwrap();
    let out = common::playdeck()
        .args([
            "run",
            "gates.toml",
            "--headless",
            "--approve",
            "all",
            "--speed",
            "8",
        ])
        .args(["--run-dir", "run"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = common::playdeck()
        .args(["replay", "run", "--cast", "run.cast", "--speed", "4"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let played = player
        .arg("cat")
        .arg(d.path().join("run.cast"))
        .output()
        .unwrap();
    assert!(played.status.success(), "asciinema reads it: {played:?}");
    let mut vt = vt100::Parser::new(
        std::num::NonZero::new(36).unwrap(),
        std::num::NonZero::new(120).unwrap(),
        0,
    );
    vt.process(&played.stdout);
    let screen = vt.screen().contents();
    assert!(
        screen.contains("playdeck replay") && screen.contains("finished: succeeded"),
        "{screen}"
    );
}
