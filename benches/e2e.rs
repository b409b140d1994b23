//! End-to-end benchmark: the real binary, headless, with its run directory
//! on disk. `cargo bench --bench e2e` generates a play per case and size,
//! runs `playdeck run PLAY --headless` on it and prints one JSON line per
//! case: wall time, peak RSS, bytes written to the run directory (and how
//! many write calls), the run directory's size at the end, and the ratio
//! to the kernel alone on the same work (run in-process, as `cargo bench
//! --bench kernel` does).
//!
//! Cases (every operation on the `noop` agent, max_concurrent 10 000):
//! fanout (n independent operations), chain (n in a line), layered (10
//! layers of n/10, each operation after 2 of the layer before), reactive
//! (one operation whose result holds n spawn requests; max_spawn and
//! max_requests n).
//!
//! Pass case names and/or sizes for a subset: `cargo bench --bench e2e --
//! fanout 100000`. Sizes default to 10 000, 100 000 and 1 000 000. Each
//! line is the median of three runs (by wall time; `runs=1` for one), and
//! `sync` runs, untimed, before each: otherwise the page cache's writeback
//! of the previous run (gigabytes at 1 000 000) lands on the next one.
//! Measurements use GNU time (`/usr/bin/time`) for the peak RSS and the
//! kernel's per-process I/O accounting (`/proc/<pid>/io`, which counts
//! reaped children) for bytes written. `PLAYDECK_BENCH_BIN=PATH` measures
//! another binary (a previous commit's) with the same plays.

#[path = "shared/kernel_cases.rs"]
mod cases;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

const CASES: [&str; 4] = ["fanout", "chain", "layered", "reactive"];
const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];

/// A play for `case` at size `n`.
fn play(case: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * 96 + 512);
    let max_spawn = if case == "reactive" { n } else { 50 };
    let _ = write!(
        s,
        "[play]\nname = \"{case} {n}\"\nmax_concurrent = 10000\nmax_spawn = {max_spawn}\nmax_requests = {}\n\
         [palette]\nroles = [{{ role = \"orchestrator\", disposition = \"emission_capable\" }}, {{ role = \"implementer\" }}]\n",
        n.max(1) + 1
    );
    let op = |s: &mut String, id: &str, deps: Option<&[String]>| {
        let _ = write!(
            s,
            "[[operations]]\nid = \"{id}\"\nrole = \"implementer\"\ninstruction = \"w\"\nagent = \"noop\"\n"
        );
        match deps {
            None => s.push_str("independent_root = true\n"),
            Some([]) => {}
            Some(d) => {
                s.push_str("depends_on = [");
                for (i, x) in d.iter().enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    let _ = write!(s, "\"{x}\"");
                }
                s.push_str("]\n");
            }
        }
    };
    match case {
        "fanout" => {
            for i in 0..n {
                op(&mut s, &format!("op-{i}"), None);
            }
        }
        "chain" => {
            // Sequential authoring: each after the one above it.
            for i in 0..n {
                op(&mut s, &format!("op-{i}"), Some(&[]));
            }
        }
        "layered" => {
            let width = n / 10;
            for i in 0..width {
                op(&mut s, &format!("l0-{i}"), None);
            }
            for l in 1..10 {
                for i in 0..width {
                    let deps = [
                        format!("l{}-{i}", l - 1),
                        format!("l{}-{}", l - 1, (i + 1) % width),
                    ];
                    op(&mut s, &format!("l{l}-{i}"), Some(&deps));
                }
            }
        }
        _ => {
            // The worker role's spawned work runs on the agent of its first
            // operation: a noop one.
            op(&mut s, "warm", None);
            s.push_str(
                "[[operations]]\nid = \"root\"\nrole = \"orchestrator\"\ninstruction = \"emit\"\nindependent_root = true\n\
                 [operations.sim]\nduration_ms = 0\n[operations.sim.result]\nspawn_request = [\n",
            );
            for i in 0..n {
                let _ = writeln!(
                    s,
                    "{{ instruction = \"child {i}\", assignee = \"implementer\" }},"
                );
            }
            s.push_str("]\n");
        }
    }
    s
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn io_field(io: &str, key: &str) -> u64 {
    io.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
        .unwrap_or(0)
}

/// Runs the binary on `case` at `n` `runs` times; the median run's
/// measurements as JSON, with the fastest and slowest wall times.
fn e2e(case: &str, n: usize, base: &Path, runs: usize) -> Value {
    let text = play(case, n);
    let mut all: Vec<Value> = (0..runs.max(1))
        .map(|_| e2e_once(case, n, base, &text))
        .collect();
    let wall = |v: &Value| v["wall_s"].as_f64().unwrap_or(f64::NAN);
    all.sort_by(|a, b| wall(a).total_cmp(&wall(b)));
    let (lo, hi) = (
        all[0]["wall_s"].clone(),
        all[all.len() - 1]["wall_s"].clone(),
    );
    let mut v = all.swap_remove(all.len() / 2);
    v["runs"] = json!(runs.max(1));
    v["wall_min_s"] = lo;
    v["wall_max_s"] = hi;
    v
}

fn e2e_once(case: &str, n: usize, base: &Path, text: &str) -> Value {
    let dir = base.join(format!("{case}-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let play_path = dir.join("play.toml");
    std::fs::write(&play_path, text).unwrap();
    // Untimed: the dirty pages of what came before reach the disk first.
    let _ = std::process::Command::new("sync").status();
    // A shell that runs the binary under GNU time and reports its own I/O
    // counters afterwards: they include the reaped child's.
    let script = r#"/usr/bin/time -f '%M' -o "$D/time" "$BIN" run "$D/play.toml" --headless --run-dir "$D/run" >/dev/null 2>"$D/stderr"
echo $? >"$D/code"
cat /proc/$$/io >"$D/io""#;
    let t = Instant::now();
    let st = std::process::Command::new("sh")
        .args(["-c", script])
        .env("D", &dir)
        .env("BIN", binary())
        .status()
        .expect("sh");
    let wall = t.elapsed().as_secs_f64();
    assert!(st.success());
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let code: i32 = read("code").trim().parse().unwrap_or(-1);
    assert_eq!(code, 0, "{case} {n}: {}", read("stderr"));
    let peak_kib: f64 = read("time")
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(f64::NAN);
    let io = read("io");
    let run_bytes = dir_bytes(&dir.join("run"));
    let _ = std::fs::remove_dir_all(&dir);
    json!({
        "case": case,
        "n": n,
        "play_mib": cases::round(text.len() as f64 / 1048576.0),
        "wall_s": cases::round(wall),
        "peak_rss_mib": cases::round(peak_kib / 1024.0),
        "written_mib": cases::round(io_field(&io, "write_bytes") as f64 / 1048576.0),
        "write_calls": io_field(&io, "syscw"),
        "run_dir_mib": cases::round(run_bytes as f64 / 1048576.0),
    })
}

/// The binary measured: this build's, or `PLAYDECK_BENCH_BIN` (another
/// commit's, for a side-by-side run in the same window).
fn binary() -> String {
    std::env::var("PLAYDECK_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_playdeck").into())
}

/// The kernel alone on the same work, in a fresh process.
fn kernel_only(case: &str, n: usize) -> Value {
    let me = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(me)
        .env(ONE, format!("{case}:{n}"))
        .output()
        .expect("run the kernel case");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

const ONE: &str = "PLAYDECK_BENCH_KERNEL";

fn main() {
    if let Ok(one) = std::env::var(ONE) {
        let (case, n) = one.split_once(':').expect("case:n");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        println!("{}", cases::run_case(&rt, case, n.parse().expect("a size")));
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let named: Vec<&str> = CASES
        .iter()
        .copied()
        .filter(|c| args.iter().any(|a| a == c))
        .collect();
    let cases_run = if named.is_empty() {
        CASES.to_vec()
    } else {
        named
    };
    let runs: usize = args
        .iter()
        .find_map(|a| a.strip_prefix("runs=")?.parse().ok())
        .unwrap_or(3);
    let picked: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if picked.is_empty() {
        SIZES.to_vec()
    } else {
        picked
    };
    let base = std::env::temp_dir().join(format!("playdeck-e2e-{}", std::process::id()));
    for case in cases_run {
        for &n in &sizes {
            let mut v = e2e(case, n, &base, runs);
            let k = kernel_only(case, n);
            let kernel_s =
                k["build_s"].as_f64().unwrap_or(0.0) + k["wall_s"].as_f64().unwrap_or(0.0);
            v["kernel_s"] = json!(cases::round(kernel_s));
            v["kernel_rss_mib"] = k["peak_rss_mib"].clone();
            v["ratio_to_kernel"] = json!(cases::round(
                v["wall_s"].as_f64().unwrap() / kernel_s.max(1e-9)
            ));
            println!("{v}");
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
