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

/// A port on 127.0.0.1 where nothing listens, and nothing will while the
/// returned socket lives: it is bound but never listens, so a connection
/// is refused at once. (A port found free and let go could be taken by any
/// server another test starts meanwhile.)
pub fn refused_port() -> (rustix::fd::OwnedFd, u16) {
    use rustix::net::{AddressFamily, SocketType, bind, getsockname, ipproto, socket};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, Some(ipproto::TCP)).unwrap();
    bind(
        &fd,
        &std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0),
    )
    .unwrap();
    let addr = std::net::SocketAddr::try_from(getsockname(&fd).unwrap()).unwrap();
    (fd, addr.port())
}

/// A JetStream server with its store in a temporary directory; killed on
/// drop.
pub struct Nats {
    child: Option<Child>,
    /// A server configuration file (`-c`), for authorization.
    conf: Option<PathBuf>,
    /// The client and monitoring ports: chosen by the server itself at its
    /// first start (`-1`, read back from its ports file), kept for a restart
    /// so the run's URL stays right.
    ports: Option<(u16, u16)>,
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
            ports: None,
            store,
        };
        n.up();
        Some(n)
    }

    pub fn url(&self) -> String {
        format!(
            "nats://127.0.0.1:{}",
            self.ports.expect("the server has started").0
        )
    }

    /// Starts the server: the first time on ports of its own choosing,
    /// again on the same ports and store. A server that does not come up
    /// fails the test with the last lines it wrote.
    pub fn up(&mut self) {
        let ports_dir = self.store.path().join("ports");
        let _ = std::fs::remove_dir_all(&ports_dir);
        std::fs::create_dir_all(&ports_dir).unwrap();
        let log = self.store.path().join("server.log");
        let (client, monitor) = match self.ports {
            Some((c, m)) => (c.to_string(), m.to_string()),
            None => ("-1".into(), "-1".into()),
        };
        let mut c = Command::new(server_binary().unwrap());
        if let Some(conf) = &self.conf {
            c.arg("-c").arg(conf);
        }
        let mut child = c
            .args(["-js", "-a", "127.0.0.1", "-p", &client, "-m", &monitor])
            .arg("--ports_file_dir")
            .arg(&ports_dir)
            .arg("-sd")
            .arg(self.store.path().join("js"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let fail = |child: &mut Child, why: &str| -> ! {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!("nats-server {why}; its last lines:\n{}", tail.join("\n"));
        };
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                fail(
                    &mut child,
                    &format!("exited ({status}) before it was ready"),
                );
            }
            if self.ports.is_none() {
                self.ports = read_ports(&ports_dir);
            }
            if self.ports.is_some() && self.healthy() {
                break;
            }
            if Instant::now() >= deadline {
                fail(&mut child, "was not ready within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
    }

    pub fn healthy(&self) -> bool {
        let Some((_, monitor)) = self.ports else {
            return false;
        };
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", monitor)) else {
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

/// The client and monitoring ports from the server's ports file
/// (`{"nats":["nats://127.0.0.1:P"],"monitoring":["http://127.0.0.1:M"]}`),
/// once it is written whole.
fn read_ports(dir: &Path) -> Option<(u16, u16)> {
    let file = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".ports"))?;
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file.path()).ok()?).ok()?;
    let port = |key: &str| -> Option<u16> { v[key][0].as_str()?.rsplit(':').next()?.parse().ok() };
    Some((port("nats")?, port("monitoring")?))
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
