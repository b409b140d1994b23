//! A real `nats-server -js` on 127.0.0.1 and `playdeck worker` processes,
//! for the scale-out tests (`tests/cluster.rs`) and the console's. The
//! server is installed by `tests/cluster/install.sh` into
//! target/nats-server; without it [`Nats::start`] says so and gives none.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn server_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nats-server/bin/nats-server");
    p.is_file().then_some(p)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A JetStream server with its store in a temporary directory; killed on
/// drop.
pub struct Nats {
    child: Option<Child>,
    /// A server configuration file (`-c`), for authorization.
    conf: Option<PathBuf>,
    port: u16,
    monitor: u16,
    store: tempfile::TempDir,
}

impl Nats {
    pub fn start() -> Option<Nats> {
        Nats::start_with(None)
    }

    pub fn start_with(conf: Option<&str>) -> Option<Nats> {
        let Some(_) = server_binary() else {
            println!(
                "skipped: no nats-server under target/nats-server (tests/cluster/install.sh installs it)"
            );
            return None;
        };
        let store = tempfile::tempdir().unwrap();
        let conf = conf.map(|text| {
            let p = store.path().join("server.conf");
            std::fs::write(&p, text).unwrap();
            p
        });
        let mut n = Nats {
            child: None,
            conf,
            port: free_port(),
            monitor: free_port(),
            store,
        };
        n.up();
        Some(n)
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, on the same port and store).
    pub fn up(&mut self) {
        let mut c = Command::new(server_binary().unwrap());
        if let Some(conf) = &self.conf {
            c.arg("-c").arg(conf);
        }
        let child = c
            .args(["-js", "-a", "127.0.0.1"])
            .args([
                "-p",
                &self.port.to_string(),
                "-m",
                &self.monitor.to_string(),
            ])
            .arg("-sd")
            .arg(self.store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.healthy() {
            assert!(Instant::now() < deadline, "nats-server did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn healthy(&self) -> bool {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.monitor)) else {
            return false;
        };
        let _ =
            s.write_all(b"GET /healthz?js-enabled-only=true HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `playdeck worker` process; killed on drop.
pub struct Worker(Child);

impl Worker {
    pub fn start(dir: &Path, nats: &Nats, slots: u16) -> Worker {
        Worker::start_env(dir, nats, slots, &[])
    }

    pub fn start_env(dir: &Path, nats: &Nats, slots: u16, env: &[(&str, &Path)]) -> Worker {
        Worker::start_args(dir, nats, slots, env, &[])
    }

    pub fn start_args(
        dir: &Path,
        nats: &Nats,
        slots: u16,
        env: &[(&str, &Path)],
        args: &[&str],
    ) -> Worker {
        let child = Command::new(env!("CARGO_BIN_EXE_playdeck"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["worker", "--nats", &nats.url(), "--play", "play.toml"])
            .args(args)
            .args(["--slots", &slots.to_string(), "--ack-wait", "2", "--dir"])
            .arg(dir)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Worker(child)
    }

    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Whether a worker id (`<host>-<pid>`, as the run records it) is this
    /// process's.
    pub fn is(&self, id: &str) -> bool {
        id.ends_with(&format!("-{}", self.0.id()))
    }

    /// Its exit status, when it ends within `within`.
    pub fn exited_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.0.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
