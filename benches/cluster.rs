//! Scale-out overhead: `cargo bench --bench cluster [-- N [WORKERS SLOTS]]`
//! runs N independent `noop` operations (default 10 000) through the real
//! binary, headless, once locally and once over a real `nats-server -js` on
//! 127.0.0.1 (target/nats-server, from tests/cluster/install.sh) with
//! WORKERS `playdeck worker` processes (default 4) of SLOTS slots each
//! (default 16), and prints one JSON line: wall times, throughput and the
//! per-operation cost the cluster adds.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

/// The client and monitoring ports the server chose (`-p -1 -m -1`), from
/// the ports file it writes once it listens.
fn ports(dir: &Path) -> Option<(u16, u16)> {
    let file = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".ports"))?;
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file.path()).ok()?).ok()?;
    let port = |key: &str| -> Option<u16> { v[key][0].as_str()?.rsplit(':').next()?.parse().ok() };
    Some((port("nats")?, port("monitoring")?))
}

fn healthy(monitor: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", monitor)) else {
        return false;
    };
    let _ = s.write_all(b"GET /healthz?js-enabled-only=true HTTP/1.0\r\n\r\n");
    let mut a = String::new();
    let _ = s.read_to_string(&mut a);
    a.contains(" 200 ")
}

fn play(n: usize, cluster: Option<&str>) -> String {
    let mut s = String::from(
        "[play]\nname = \"bench\"\nmax_concurrent = 10000\n\
         [palette]\nroles = [{ role = \"implementer\" }]\n",
    );
    if let Some(url) = cluster {
        s.push_str(&format!("[cluster]\nnats = \"{url}\"\n"));
    }
    for i in 0..n {
        s.push_str(&format!(
            "[[operations]]\nid = \"op-{i}\"\nrole = \"implementer\"\ninstruction = \"w\"\nagent = \"noop\"\nindependent_root = true\n"
        ));
    }
    s
}

/// Seconds `playdeck run --headless` takes on `play` in `dir`.
fn run(dir: &Path, name: &str, text: &str) -> f64 {
    std::fs::write(dir.join(name), text).unwrap();
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_playdeck"))
        .env("PLAYDECK_NATS_CREDS", dir.join("nats.toml"))
        .args(["run", "--headless", "--format", "human", name])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    secs
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(10_000);
    let workers = args.get(1).copied().unwrap_or(4);
    let slots = args.get(2).copied().unwrap_or(16);
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nats-server/bin/nats-server");
    if !server.is_file() {
        eprintln!("no nats-server: run tests/cluster/install.sh first");
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Jobs are signed, as they must be: a key the run and workers share.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(
            d.join("pd.key"),
            "YSBzaWduaW5nIGtleSBmb3IgdGhlIGNsdXN0ZXIgYmVuY2g=\n",
        )
        .unwrap();
        std::fs::set_permissions(d.join("pd.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(d.join("nats.toml"), "signing_key_file = \"pd.key\"\n").unwrap();
    }
    let local = run(d, "local.toml", &play(n, None));

    let store = tempfile::tempdir().unwrap();
    let mut nats = Command::new(&server)
        .args(["-js", "-a", "127.0.0.1", "-p", "-1", "-m", "-1"])
        .arg("--ports_file_dir")
        .arg(store.path())
        .arg("-sd")
        .arg(store.path().join("js"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (port, _monitor) = loop {
        if let Some(p) = ports(store.path()).filter(|p| healthy(p.1)) {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let url = format!("nats://127.0.0.1:{port}");
    let text = play(n, Some(&url));
    std::fs::write(d.join("cluster.toml"), &text).unwrap();
    let mut pool: Vec<Child> = (0..workers)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_playdeck"))
                .env("PLAYDECK_NATS_CREDS", d.join("nats.toml"))
                .args(["worker", "--nats", &url, "--play", "cluster.toml"])
                .args(["--slots", &slots.to_string(), "--dir"])
                .arg(d)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // The workers are up when they have made their consumers; a second is
    // plenty, and is not counted.
    std::thread::sleep(Duration::from_secs(1));
    let cluster = run(d, "cluster.toml", &text);
    for w in &mut pool {
        let _ = w.kill();
        let _ = w.wait();
    }
    let _ = nats.kill();
    let _ = nats.wait();
    println!(
        "{}",
        json!({
            "bench": "cluster",
            "operations": n,
            "workers": workers,
            "slots": slots,
            "local_secs": (local * 1000.0).round() / 1000.0,
            "cluster_secs": (cluster * 1000.0).round() / 1000.0,
            "local_ops_per_sec": (n as f64 / local).round(),
            "cluster_ops_per_sec": (n as f64 / cluster).round(),
            "added_us_per_op": ((cluster - local) * 1e6 / n as f64).round(),
        })
    );
}
