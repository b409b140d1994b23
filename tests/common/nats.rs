//! A real `nats-server -js` on 127.0.0.1 and `playdeck worker` processes,
//! for the scale-out tests (`tests/external/cluster.rs`) and the
//! console's (`tests/external/console_pty.rs`). The
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
    /// fails the test with the last lines it wrote. On a restart the old
    /// ports may not be free again at once (a socket of the killed server
    /// the kernel still holds): a server that exits saying so is started
    /// again, a few times, after a short pause.
    pub fn up(&mut self) {
        const TRIES: u32 = 5;
        for attempt in 1..=TRIES {
            match self.try_up() {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                Err(Exit::AddressInUse(said)) if attempt < TRIES => {
                    let last = said.lines().last().unwrap_or("");
                    println!("nats-server start {attempt}: {last}; starting it again");
                    std::thread::sleep(Duration::from_millis(300 * u64::from(attempt)));
                }
                Err(Exit::AddressInUse(said)) => {
                    panic!(
                        "nats-server: its ports stayed taken after {TRIES} starts; its last lines:\n{said}"
                    )
                }
            }
        }
    }

    /// One start: the server once ready, or the address-in-use exit that
    /// is worth another try. Any other failure fails the test.
    fn try_up(&mut self) -> Result<Child, Exit> {
        let ports_dir = self.store.path().join("ports");
        let _ = std::fs::remove_dir_all(&ports_dir);
        std::fs::create_dir_all(&ports_dir).unwrap();
        let log = self.store.path().join("server.log");
        // Appended to: what an earlier start said stays for the failure.
        let from = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
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
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap(),
            )
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let tail = || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        };
        let fail = |child: &mut Child, why: &str| -> ! {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nats-server {why}; its last lines:\n{}", tail());
        };
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text
                    .get(from..)
                    .is_some_and(|t| t.contains("address already in use"))
                {
                    return Err(Exit::AddressInUse(tail()));
                }
                fail(
                    &mut child,
                    &format!("exited ({status}) before it was ready"),
                );
            }
            if self.ports.is_none() {
                self.ports = read_ports(&ports_dir);
            }
            if self.ports.is_some() && self.healthy() {
                return Ok(child);
            }
            if Instant::now() >= deadline {
                fail(&mut child, "was not ready within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn healthy(&self) -> bool {
        let Some((_, monitor)) = self.ports else {
            return false;
        };
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", monitor)) else {
            return false;
        };
        // A server that takes the connection and never answers is not
        // healthy, and does not hang the test.
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
        let _ =
            s.write_all(b"GET /healthz?js-enabled-only=true HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
    }

    /// Starts the server again on the same ports without its store, as a
    /// pod without a volume comes back: streams, consumers and buckets
    /// gone.
    pub fn restart_empty(&mut self) {
        self.kill();
        std::fs::remove_dir_all(self.store.path().join("js")).unwrap();
        self.up();
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Why a start of the server did not come up and is worth another.
enum Exit {
    /// Its ports were still taken; its last lines.
    AddressInUse(String),
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

/// How long a worker's jobs may go unacknowledged (`--ack-wait`, s)
/// unless a test means to lose it: the run counts a worker lost after
/// half as long again of silence, and a worker held up a few seconds on a
/// loaded machine is not lost.
pub const ACK_WAIT: u32 = 10;

/// The ack deadline of a worker a test kills or stops on purpose: it is
/// counted lost 3 s after its last word.
pub const LOSABLE_ACK_WAIT: u32 = 2;

/// A NATS credentials file with a signing key (jobs must be signed), one
/// for the whole test process: every run and worker a test starts gets it
/// unless the test gives its own.
pub fn signed_creds() -> &'static Path {
    static CREDS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CREDS.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("playdeck-nats-creds-")
            .tempdir()
            .unwrap()
            .keep();
        let key = dir.join("pd.key");
        std::fs::write(
            &key,
            "dGhlIHRlc3RzJyBzaWduaW5nIGtleSwgMzIgYnl0ZXMgYXQgbGVhc3Q=\n",
        )
        .unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let creds = dir.join("nats.toml");
        std::fs::write(&creds, "signing_key_file = \"pd.key\"\n").unwrap();
        creds
    })
}

/// A `playdeck worker` process; killed on drop. Its stderr goes to a file
/// of its own ([`Worker::said`] gives the end of it for a failure).
pub struct Worker {
    child: Child,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

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
        Worker::spawn(dir, nats, slots, env, args, ACK_WAIT)
    }

    /// A worker the test will kill or stop, with the short ack deadline
    /// ([`LOSABLE_ACK_WAIT`]). Every worker of a play should have the
    /// same: the first to serve it sets the deadline of the play's queue.
    pub fn start_losable(dir: &Path, nats: &Nats, slots: u16) -> Worker {
        Worker::spawn(dir, nats, slots, &[], &[], LOSABLE_ACK_WAIT)
    }

    pub fn spawn(
        dir: &Path,
        nats: &Nats,
        slots: u16,
        env: &[(&str, &Path)],
        args: &[&str],
        ack_wait: u32,
    ) -> Worker {
        let logs = tempfile::tempdir().unwrap();
        let stderr = logs.path().join("worker.stderr");
        let child = super::playdeck()
            .env("PLAYDECK_NATS_CREDS", signed_creds())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["worker", "--nats", &nats.url(), "--play", "play.toml"])
            .args(args)
            .args(["--slots", &slots.to_string()])
            .args(["--ack-wait", &ack_wait.to_string(), "--dir"])
            .arg(dir)
            .env("PLAYDECK_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Worker {
            child,
            stderr,
            _dir: logs,
        }
    }

    /// The last lines the worker wrote on stderr, named by its pid, for a
    /// failure's message.
    pub fn said(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "worker {} stderr:{}{}",
            self.child.id(),
            if tail.is_empty() { " (nothing)" } else { "\n" },
            tail.join("\n")
        )
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether a worker id (`<host>-<pid>`, as the run records it) is this
    /// process's.
    pub fn is(&self, id: &str) -> bool {
        id.ends_with(&format!("-{}", self.child.id()))
    }

    /// Its exit status, when it ends within `within`.
    pub fn exited_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
