//! `playdeck replay RUN --cast FILE` (issue 42): the console over a run's
//! life as an asciicast v2 recording. Played here into vt100 (a terminal
//! emulator nobody here wrote), the last frame is the console at the
//! run's end; tests/external/cast.rs plays it in asciinema itself.

use crate::common;
use std::path::Path;

/// A finished run of the gates play (gates approved), in `dir`.
fn finished_run(dir: &Path) -> std::path::PathBuf {
    std::fs::write(
        dir.join("gates.toml"),
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
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dir.join("run")
}

/// The screen after playing every output event of `cast` in order.
pub fn play(cast: &str, w: u16, h: u16) -> String {
    let mut lines = cast.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 2);
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(w.into()), Some(h.into()))
    );
    let mut vt = vt100::Parser::new(
        std::num::NonZero::new(h).unwrap(),
        std::num::NonZero::new(w).unwrap(),
        0,
    );
    let mut last = 0.0;
    for l in lines {
        let e: serde_json::Value = serde_json::from_str(l).unwrap();
        let t = e[0].as_f64().unwrap();
        assert!(t >= last, "events in time order: {t} after {last}");
        last = t;
        assert_eq!(e[1], "o");
        vt.process(e[2].as_str().unwrap().as_bytes());
    }
    vt.screen().contents()
}

#[test]
fn a_replay_is_recorded_as_an_asciicast_that_ends_on_the_runs_end() {
    let d = tempfile::tempdir().unwrap();
    let run = finished_run(d.path());
    let cast = d.path().join("gates.cast");
    let out = common::playdeck()
        .args(["replay"])
        .arg(&run)
        .args(["--cast"])
        .arg(&cast)
        .args(["--speed", "4", "--size", "100x30"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.starts_with(&format!("wrote {}: ", cast.display())) && said.contains("at 100x30"),
        "{said}"
    );
    let text = std::fs::read_to_string(&cast).unwrap();
    let screen = play(&text, 100, 30);
    assert!(screen.contains("playdeck replay"), "{screen}");
    assert!(screen.contains("finished: succeeded"), "{screen}");
    assert!(screen.contains("succeeded 5"), "{screen}");
    // Frames carry what changed, not the whole screen again.
    let sizes: Vec<usize> = text.lines().skip(3).map(str::len).collect();
    let first = text.lines().nth(2).unwrap().len();
    assert!(
        sizes.iter().sum::<usize>() / sizes.len().max(1) < first / 4,
        "{first} then {sizes:?}"
    );
}

#[test]
fn cast_refusals_name_the_value_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let run = finished_run(d.path());
    let cast = d.path().join("x.cast");
    for (args, says) in [
        (
            vec!["--cast", "x.cast", "--size", "12"],
            "--size \"12\" is not a size",
        ),
        (
            vec!["--cast", "x.cast", "--speed", "100"],
            "--speed 100 is out of range",
        ),
        (vec!["--size", "100x30"], "--cast"),
    ] {
        let out = common::playdeck()
            .arg("replay")
            .arg(&run)
            .args(&args)
            .current_dir(d.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!cast.exists());
    }
}
