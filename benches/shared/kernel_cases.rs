//! The kernel-only cases, shared by the kernel benchmark and the
//! end-to-end one (which reports its ratio to them).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use playdeck::agents::AgentRegistry;
use playdeck::kernel::{
    Agent, AgentOutcome, AgentResolver, BoxFuture, Condition, Graph, GraphBuilder, Invocation,
    OpId, Operation, RoleRoute, Run, RunConfig, StaticRoleBuilder,
};
use serde_json::{Value, json};

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

pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

pub fn run_case(rt: &tokio::runtime::Runtime, case: &str, n: usize) -> Value {
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
        max_requests: n + 1,
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

pub fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
