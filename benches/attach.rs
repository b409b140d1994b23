//! Watchers and consoles on a big run: `cargo bench --bench attach`.
//!
//! Runs the release binary headless on a fanout of N `noop` operations
//! (default 100 000) three ways — alone, with 4 `ctl RUN events --follow`
//! watchers, and with 4 real consoles (`playdeck attach`, each in its own
//! 120×36 pseudo-terminal, its screen parsed) — and prints one JSON line
//! per way: the time until `result.json` is written (the run's wall time),
//! the run's own clock at `run_finished`, and for consoles the key→frame
//! latency while the run goes (`?` pressed, until the help is on screen;
//! the median and worst of 20 presses, made while the run goes and the
//! console catches up with its events). The run is started as `playdeck
//! run PLAY` starts it (`--host`: a session, and so a scheduling group, of
//! its own); this harness — its polling, the screen it parses, the pipes
//! it drains — steps back to nice 19 in its own group, so what is measured
//! is what the watchers cost the run, not what the measuring does. The
//! ways take turns, and each is the median (and the best, `vs_none_min`) of
//! `runs=3` (`cargo bench --bench attach -- 100000 runs=3`); `paced`
//! gives each operation 100 ms of sim work, 5 000 at a time, instead of
//! none. `ATTACH_BENCH_TRACE=1` prints each run's key→frame times.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use serde_json::json;

fn binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ok = Command::new("cargo")
        .args(["build", "--release", "--quiet", "--bin", "playdeck"])
        .current_dir(root)
        .status()
        .expect("cargo");
    assert!(ok.success());
    root.join("target/release/playdeck")
}

/// `noop`: every operation done at once (the agent-free worst case);
/// `paced`: each takes 100 ms of sim time, 5 000 at a time (a run whose
/// work, not its bookkeeping, sets the pace).
fn play(n: usize, paced: bool) -> String {
    let concurrent = if paced { 5000 } else { 10000 };
    let mut s = format!(
        "[play]\nname = \"fanout {n}\"\nmax_concurrent = {concurrent}\n[palette]\nroles = [{{ role = \"implementer\" }}]\n"
    );
    let work = if paced {
        "sim = { duration_ms = 100 }\n"
    } else {
        "agent = \"noop\"\n"
    };
    for i in 0..n {
        s.push_str(&format!(
            "[[operations]]\nid = \"op-{i}\"\nrole = \"implementer\"\ninstruction = \"w\"\n{work}independent_root = true\n"
        ));
    }
    s
}

struct Pty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    parser: Arc<Mutex<vt100::Parser>>,
}

/// A console in a pseudo-terminal; only a `parsed` one's screen is kept
/// (parsing four screens would load this harness, not playdeck).
fn console(bin: &Path, dir: &Path, run: &Path, parsed: bool) -> Pty {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 36,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(bin);
    cmd.args(["attach", run.to_str().unwrap()]);
    cmd.cwd(dir);
    cmd.env("TERM", "xterm-256color");
    cmd.env("PLAYDECK_CONFIG_DIR", dir.join("config"));
    let child = pty.slave.spawn_command(cmd).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let writer = pty.master.take_writer().unwrap();
    let parser = Arc::new(Mutex::new(vt100::Parser::new(
        std::num::NonZero::new(36).unwrap(),
        std::num::NonZero::new(120).unwrap(),
        0,
    )));
    let feed = parser.clone();
    std::thread::spawn(move || {
        let _master = pty.master;
        let mut buf = [0u8; 65536];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            if parsed {
                feed.lock().unwrap().process(&buf[..n]);
            }
        }
    });
    Pty {
        child,
        writer,
        parser,
    }
}

fn screen(p: &Pty) -> String {
    p.parser.lock().unwrap().screen().contents()
}

/// One run with `watchers` of `kind`; its measurements.
fn once(bin: &Path, base: &Path, text: &str, kind: &str, watchers: usize) -> serde_json::Value {
    let dir = tempfile::tempdir_in(base).unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("config")).unwrap();
    std::fs::write(d.join("play.toml"), text).unwrap();
    let _ = Command::new("sync").status();
    let t = Instant::now();
    let mut host = Command::new(bin)
        .args([
            "run",
            "play.toml",
            "--headless",
            "--host",
            "--run-dir",
            "run",
        ])
        .current_dir(d)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sock = d.join("run/ctl/control.sock");
    while watchers > 0 && std::os::unix::net::UnixStream::connect(&sock).is_err() {
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut followers = Vec::new();
    let mut consoles = Vec::new();
    for _ in 0..watchers {
        match kind {
            "events" => {
                let mut c = Command::new(bin)
                    .args(["ctl", "run", "events", "--follow"])
                    .current_dir(d)
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut out = c.stdout.take().unwrap();
                std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
                followers.push(c);
            }
            _ => {
                let first = consoles.is_empty();
                consoles.push(console(bin, d, &d.join("run"), first));
            }
        }
    }
    // The run's wall time: until its result is written, seen by a thread
    // of its own (the key presses below may outlast the run).
    let result = d.join("run/result.json");
    let written = {
        let result = result.clone();
        std::thread::spawn(move || {
            while !result.exists() {
                std::thread::sleep(Duration::from_millis(2));
            }
            t.elapsed().as_secs_f64()
        })
    };
    // Key→frame while the run goes: `?` opens the help, `?` closes it.
    let mut latencies = Vec::new();
    if let Some(p) = consoles.first_mut() {
        let open = Instant::now();
        while !screen(p).contains("Spawn ledger") && open.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        // While the run goes and the console catches up with its events.
        while latencies.len() < 20 {
            let want_help = latencies.len() % 2 == 0;
            let k = Instant::now();
            p.writer.write_all(b"?").unwrap();
            p.writer.flush().unwrap();
            loop {
                if screen(p).contains("Keys ·") == want_help {
                    break;
                }
                if k.elapsed() > Duration::from_secs(5) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            latencies.push(k.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let wall = written.join().unwrap();
    for mut c in followers {
        let _ = c.wait();
    }
    // A hosted run waits for its consoles to leave before it exits.
    for mut c in consoles {
        // `q`, and enter for a console still behind its run's end (it asks
        // whether to detach).
        let _ = c.writer.write_all(b"q");
        let _ = c.writer.flush();
        std::thread::sleep(Duration::from_millis(100));
        let _ = c.writer.write_all(b"\r");
        let _ = c.writer.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.child.kill();
    }
    let status = host.wait().unwrap();
    assert!(status.success());
    let exited = t.elapsed().as_secs_f64();
    let log = std::fs::read_to_string(d.join("run/events.jsonl")).unwrap();
    let clock = log
        .lines()
        .rev()
        .find(|l| l.contains("\"run_finished\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v["elapsed"].as_f64())
        .unwrap_or(f64::NAN);
    if std::env::var_os("ATTACH_BENCH_TRACE").is_some() {
        eprintln!("key→frame ms in order: {latencies:.1?}");
    }
    latencies.sort_by(f64::total_cmp);
    json!({
        "wall_s": wall,
        // Until the host exited: after its result, once its consoles left.
        "exit_s": exited,
        "run_clock_s": clock,
        "key_frame_ms_median": latencies.get(latencies.len() / 2),
        "key_frame_ms_max": latencies.last(),
        "key_frame_ms_p90": latencies.get(latencies.len() * 9 / 10),
        "key_presses": latencies.len(),
    })
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n = args
        .iter()
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(100_000);
    let runs = args
        .iter()
        .find_map(|a| a.strip_prefix("runs=")?.parse().ok())
        .unwrap_or(3usize);
    let paced = args.iter().any(|a| a == "paced");
    let bin = binary();
    // Nice is per thread on Linux: set before any thread is started, for
    // all of them; the group's, for this session against the run's.
    // (The group is the terminal's session: put back at the end.)
    let _ = rustix::process::nice(19);
    let group_was = std::fs::read_to_string("/proc/self/autogroup")
        .ok()
        .and_then(|s| s.rsplit(' ').next()?.trim().parse::<i32>().ok());
    let _ = std::fs::write("/proc/self/autogroup", "19");
    let base = tempfile::tempdir().unwrap();
    let text = play(n, paced);
    // The ways take turns, round after round: a machine that drifts (its
    // page cache, its clock speed, a neighbour) drifts for all of them.
    let ways = [("none", 0), ("events", 4), ("consoles", 4)];
    let mut all: Vec<Vec<serde_json::Value>> = vec![Vec::new(); ways.len()];
    for _ in 0..runs {
        for (i, (kind, watchers)) in ways.iter().enumerate() {
            all[i].push(once(&bin, base.path(), &text, kind, *watchers));
        }
    }
    let wall = |v: &serde_json::Value| v["wall_s"].as_f64().unwrap();
    let mut alone = None;
    for ((kind, watchers), mut all) in ways.into_iter().zip(all) {
        all.sort_by(|a, b| wall(a).total_cmp(&wall(b)));
        let mut m = all[all.len() / 2].clone();
        let (median, min) = (wall(&m), wall(&all[0]));
        let (alone_median, alone_min) = *alone.get_or_insert((median, min));
        m["case"] = json!(format!(
            "fanout {n}{}",
            if paced { " paced" } else { " noop" }
        ));
        m["watchers"] = json!(format!("{watchers} {kind}"));
        m["vs_none"] = json!(median / alone_median);
        m["vs_none_min"] = json!(min / alone_min);
        m["wall_s_min"] = json!(min);
        m["wall_s_max"] = json!(wall(&all[all.len() - 1]));
        println!("{m}");
    }
    if let Some(n) = group_was {
        let _ = std::fs::write("/proc/self/autogroup", n.to_string());
    }
}
