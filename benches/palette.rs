//! Palette router benchmark: `cargo bench --bench palette` prints one JSON
//! line per case.
//!
//! - `existing_sync`: 100 000 requests to roles already in the palette,
//!   decided on the synchronous fast path the kernel uses (`route_now`).
//! - `existing_async`: the same through the awaitable path (`build`).
//! - `same_new_role`: 10 000 concurrent requests (tasks) for one role outside
//!   the palette; the time until all have their answer, and how many
//!   provisioning attempts ran (must be exactly one).

use std::sync::Arc;
use std::time::Instant;

use playdeck::kernel::{Emitter, NodeBuilder, SpawnRequest};
use playdeck::palette::{
    Disposition, PaletteConfig, PaletteExpansionPolicy, PaletteRole, PaletteRouter,
    PlayRolePalette, RoleSetups, RunProvisioner,
};
use serde_json::json;

fn router() -> Arc<PaletteRouter> {
    let mut cfg = PaletteConfig::legacy(PaletteConfig::builtin_pack(), Default::default());
    cfg.legacy = false;
    let role = |r: &str, d| PaletteRole {
        role: r.into(),
        disposition: d,
        modes: vec![],
        setup: None,
    };
    cfg.palette = PlayRolePalette {
        roles: vec![
            role("orchestrator", Disposition::EmissionCapable),
            role("tester", Disposition::Terminal),
            role("implementer", Disposition::Terminal),
        ],
        expansion: PaletteExpansionPolicy {
            max_new_roles: 1,
            ..Default::default()
        },
        defaults: None,
    };
    let provisioner = RunProvisioner {
        run_dir: None,
        simulate: Default::default(),
        speed: 1.0,
        setups: Arc::new(RoleSetups::all_on("sim")),
    };
    PaletteRouter::new(Arc::new(cfg), Arc::new(provisioner))
}

fn emitter() -> Emitter {
    Emitter {
        op_id: uuid::Uuid::new_v4(),
        name: Arc::from("kickoff"),
        role: Some(Arc::from("orchestrator")),
        requester_role: Some(Arc::from("orchestrator")),
        agent: Arc::from("sim"),
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let n = 100_000;
    let requests: Vec<SpawnRequest> = (0..n)
        .map(|i| {
            SpawnRequest::new(format!("task {i}")).to(if i % 2 == 0 {
                "tester"
            } else {
                "implementer"
            })
        })
        .collect();
    let e = emitter();

    let r = router();
    rt.block_on(r.provision_initial()).unwrap();
    let t = Instant::now();
    let mut ok = 0usize;
    for req in &requests {
        if let Some(Ok(Some(_))) = r.route_now(req, &e) {
            ok += 1;
        }
    }
    let s = t.elapsed().as_secs_f64();
    assert_eq!(ok, n);
    println!(
        "{}",
        json!({"case": "existing_sync", "n": n, "wall_s": s, "per_request_us": s * 1e6 / n as f64})
    );

    let t = Instant::now();
    let ok = rt.block_on(async {
        let mut ok = 0usize;
        for req in &requests {
            if let Ok(Some(_)) = r.build(req, &e).await {
                ok += 1;
            }
        }
        ok
    });
    let s = t.elapsed().as_secs_f64();
    assert_eq!(ok, n);
    println!(
        "{}",
        json!({"case": "existing_async", "n": n, "wall_s": s, "per_request_us": s * 1e6 / n as f64})
    );

    let concurrent = 10_000;
    let r = router();
    rt.block_on(r.provision_initial()).unwrap();
    let before = r.provision_attempts();
    let t = Instant::now();
    let answered = rt.block_on(async {
        let tasks: Vec<_> = (0..concurrent)
            .map(|i| {
                let r = r.clone();
                tokio::spawn(async move {
                    r.route_request(
                        SpawnRequest::new(format!("critique {i}")).to("critic"),
                        emitter(),
                    )
                    .await
                })
            })
            .collect();
        let mut answered = 0usize;
        for t in tasks {
            if let Ok(Ok(Some(_))) = t.await {
                answered += 1;
            }
        }
        answered
    });
    let s = t.elapsed().as_secs_f64();
    let provisionings = r.provision_attempts() - before;
    assert_eq!(answered, concurrent);
    println!(
        "{}",
        json!({"case": "same_new_role", "n": concurrent, "wall_s": s, "provisionings": provisionings,
               "consumed_new_roles": r.snapshot().consumed_new_roles})
    );
}
