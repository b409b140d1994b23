//! Kernel benchmark: `cargo bench --bench kernel` prints one JSON line per
//! case. Every operation uses the `noop` agent and `max_concurrent` is
//! 10 000, so what is measured is the kernel itself: scheduling, signals,
//! admission.
//!
//! Cases: fanout (n independent operations), chain (n in a line), layered
//! (10 layers of n/10, each operation depending on 2 of the layer before),
//! reactive (one root emitting n dependent spawn requests, max_spawn = n)
//! and reactive_indep (the same, independent). `build_s` is building and
//! validating the graph, `wall_s` the run alone.
//!
//! Pass case names and/or sizes to run a subset: `cargo bench --bench
//! kernel -- chain 100000`.

#[path = "shared/kernel_cases.rs"]
mod cases;

use cases::run_case;
use serde_json::{Value, json};

const CASES: [&str; 5] = ["fanout", "chain", "layered", "reactive", "reactive_indep"];
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// Each case runs in its own process, so its peak RSS is its own.
const ONE: &str = "PLAYDECK_BENCH_ONE";

fn main() {
    if let Ok(one) = std::env::var(ONE) {
        let (case, n) = one.split_once(':').expect("case:n");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        println!("{}", run_case(&rt, case, n.parse().expect("a size")));
        return;
    }
    // `cargo bench` passes --bench; other arguments select cases and sizes.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let named: Vec<&str> = CASES
        .iter()
        .copied()
        .filter(|c| args.iter().any(|a| a == c))
        .collect();
    let cases = if named.is_empty() {
        CASES.to_vec()
    } else {
        named
    };
    let picked: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if picked.is_empty() {
        SIZES.to_vec()
    } else {
        picked
    };
    let me = std::env::current_exe().expect("own path");
    for case in cases {
        for &n in &sizes {
            // Three runs, each in a fresh process; report the median run.
            let mut runs: Vec<Value> = (0..RUNS)
                .map(|_| {
                    let out = std::process::Command::new(&me)
                        .env(ONE, format!("{case}:{n}"))
                        .output()
                        .expect("run one case");
                    assert!(
                        out.status.success(),
                        "{case} {n}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    serde_json::from_slice(&out.stdout).expect("one JSON line")
                })
                .collect();
            runs.sort_by(|a, b| {
                a["wall_s"]
                    .as_f64()
                    .partial_cmp(&b["wall_s"].as_f64())
                    .unwrap()
            });
            let peak = runs
                .iter()
                .filter_map(|r| r["peak_rss_mib"].as_f64())
                .fold(0.0, f64::max);
            let mut median = runs.swap_remove(RUNS / 2);
            median["peak_rss_mib"] = json!(peak);
            median["runs"] = json!(RUNS);
            println!("{median}");
        }
    }
}

const RUNS: usize = 3;
