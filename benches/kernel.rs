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

use std::sync::{Arc, Mutex};
use std::time::Instant;

use playdeck::agents::AgentRegistry;
use playdeck::kernel::{
    Agent, AgentOutcome, AgentResolver, BoxFuture, Condition, Graph, GraphBuilder, Invocation,
    OpId, Operation, RoleRoute, Run, RunConfig, StaticRoleBuilder,
};
use serde_json::{Value, json};

const CASES: [&str; 5] = ["fanout", "chain", "layered", "reactive", "reactive_indep"];
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// Returns a prepared result once (the emitter's k spawn requests), so the
/// cost of building that JSON is not counted as kernel time.
struct Emitter(Mutex<Option<Value>>);

impl Agent for Emitter {
    fn invoke(&self, _inv: Invocation) -> BoxFuture<AgentOutcome> {
        let v = self.0.lock().unwrap().take().unwrap_or(Value::Null);
        Box::pin(std::future::ready(Ok(v)))
    }
    fn wants_context(&self) -> bool {
        false
    }
}

struct Agents {
    base: AgentRegistry,
    emitter: Arc<Emitter>,
}

impl AgentResolver for Agents {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Agent>> {
        if name == "emitter" {
            Some(self.emitter.clone())
        } else {
            self.base.resolve(name)
        }
    }
}

fn noop(name: String) -> Operation {
    Operation::new(name, "work")
        .with_role("worker")
        .with_agent("noop", Value::Null)
}

fn graph(case: &str, n: usize) -> Graph {
    let mut b = GraphBuilder::with_capacity(n);
    match case {
        "fanout" => {
            for i in 0..n {
                b.add_root(noop(format!("op-{i}")));
            }
        }
        "chain" => {
            let mut prev = b.add_root(noop("op-0".into()));
            for i in 1..n {
                prev = b.add_after(noop(format!("op-{i}")), [(prev, Condition::Succeeded)]);
            }
        }
        "layered" => {
            let width = n / 10;
            let mut layer: Vec<OpId> = (0..width)
                .map(|i| b.add_root(noop(format!("l0-{i}"))))
                .collect();
            for l in 1..10 {
                layer = (0..width)
                    .map(|i| {
                        let deps =
                            [layer[i], layer[(i + 1) % width]].map(|d| (d, Condition::Succeeded));
                        b.add_after(noop(format!("l{l}-{i}")), deps)
                    })
                    .collect();
            }
        }
        _ => {
            b.add_root(
                Operation::new("root", "emit")
                    .with_role("worker")
                    .with_agent("emitter", Value::Null),
            );
        }
    }
    b.build().expect("acyclic")
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn run_case(rt: &tokio::runtime::Runtime, case: &str, n: usize) -> Value {
    let reactive = case.starts_with("reactive");
    let requests = reactive.then(|| {
        let independent = case == "reactive_indep";
        let reqs: Vec<Value> = (0..n)
            .map(|i| json!({"instruction": format!("child {i}"), "assignee": "worker", "independent": independent}))
            .collect();
        json!({ "spawn_request": reqs })
    });
    let agents = Arc::new(Agents {
        base: AgentRegistry::builtin(1.0),
        emitter: Arc::new(Emitter(Mutex::new(requests))),
    });
    let builder = Arc::new(StaticRoleBuilder::new([RoleRoute {
        role: Arc::from("worker"),
        agent: Arc::from("noop"),
        params: Arc::new(Value::Null),
    }]));
    let cfg = RunConfig {
        max_concurrent: 10_000,
        max_spawn: if reactive { n } else { 50 },
        signal_buffer: 1024,
        ..RunConfig::default()
    };

    let t = Instant::now();
    let g = graph(case, n);
    let (run, _handle) = Run::new(g, cfg, agents, builder).expect("valid graph");
    let build_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let env = rt.block_on(run.run());
    let wall_s = t.elapsed().as_secs_f64();

    let ops = env.completed_operations.len();
    let expected = if reactive { n + 1 } else { n };
    assert_eq!(ops, expected, "{case} {n}: every operation completes");
    json!({
        "case": case,
        "n": n,
        "build_s": round(build_s),
        "wall_s": round(wall_s),
        "per_op_us": round(wall_s * 1e6 / ops as f64),
        "peak_rss_mib": round(peak_rss_mib()),
    })
}

fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

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
