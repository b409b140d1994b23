//! Scale-out against a real `nats-server -js` on 127.0.0.1 (installed by
//! `tests/cluster/install.sh` into target/nats-server; without it these
//! tests say so and skip) and real `playdeck worker` processes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::nats::{Nats, Worker, refused_port, server_binary, signed_creds};
use common::{git, wait_for};
use serde_json::Value;

/// A play of `ops` independent sim operations of `ms` each, on `nats`.
fn write_play(dir: &Path, nats: &Nats, ops: usize, ms: u64) {
    write_play_with(
        dir,
        &format!("[cluster]\nnats = \"{}\"\n", nats.url()),
        ops,
        ms,
    );
}

/// The same with `extra` sections (none: a play that runs here unless
/// `--nats` says otherwise).
fn write_play_with(dir: &Path, extra: &str, ops: usize, ms: u64) {
    let mut play = format!(
        "[play]\nname = \"spread\"\nmax_concurrent = 32\n{extra}\
         [retry]\nattempts = 3\nbackoff = 0.1\nmax_backoff = 0.2\n\
         [palette]\nroles = [{{ role = \"implementer\" }}]\n"
    );
    for i in 0..ops {
        play.push_str(&format!(
            "[[operations]]\nid = \"op-{i:02}\"\nrole = \"implementer\"\ninstruction = \"work {i}\"\n\
             independent_root = true\nsim = {{ duration_ms = {ms} }}\n"
        ));
    }
    std::fs::write(dir.join("play.toml"), play).unwrap();
}

/// A play (named "spread", with `extra` sections) of the operations
/// `ids`, each held by [`held_op`] for up to `secs`; the file that
/// releases each, in the same order.
fn write_held_play(dir: &Path, extra: &str, ids: &[&str], secs: u32) -> Vec<PathBuf> {
    let mut play = format!(
        "[play]\nname = \"spread\"\nmax_concurrent = 32\n{extra}{SH_AGENT}\
         [palette]\nroles = [{{ role = \"implementer\" }}]\n"
    );
    let mut releases = Vec::new();
    for id in ids {
        let release = dir.join(format!("release-{id}"));
        play.push_str(&held_op(id, &release, secs));
        releases.push(release);
    }
    std::fs::write(dir.join("play.toml"), play).unwrap();
    releases
}

/// Ends an operation of [`write_held_play`].
fn release(file: &Path) {
    std::fs::write(file, "").unwrap();
}

/// `playdeck run --headless` of the play in `dir`, in the background.
fn start_run(dir: &Path) -> Child {
    start_run_env(dir, &[])
}

fn start_run_env(dir: &Path, env: &[(&str, &Path)]) -> Child {
    start_run_args(dir, env, &[])
}

fn start_run_args(dir: &Path, env: &[(&str, &Path)], args: &[&str]) -> Child {
    common::playdeck()
        .env("PLAYDECK_NATS_CREDS", signed_creds())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/r",
            "play.toml",
        ])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The events a finished run printed, its exit code and its stderr. A run
/// still going after `within` is killed, and its stderr says so first.
fn finish(mut run: Child, within: Duration) -> (Vec<Value>, i32, String) {
    use std::io::Read;
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let out = drain(run.stdout.take());
    let err = drain(run.stderr.take());
    // Polled here, not killed from another thread later: the pid is this
    // child's until it is waited for.
    let deadline = Instant::now() + within;
    let mut killed = false;
    let status = loop {
        if let Some(st) = run.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = run.kill();
            killed = true;
            break run.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out.join().unwrap();
    let mut stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
    if killed {
        stderr = format!("killed after {within:?}; its stderr:\n{stderr}");
    }
    let events = String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (events, status.code().unwrap_or(-1), stderr)
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

fn outcome(events: &[Value]) -> String {
    of_type(events, "run_finished")
        .first()
        .map(|e| e["outcome"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Which worker performed attempt `attempt` of `op`, from the run's logs.
fn worker_of(dir: &Path, op: &str, attempt: u32) -> Option<String> {
    let p = dir.join(format!(".playdeck/runs/r/logs/{op}.{attempt}.command.json"));
    let v: Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
    v["worker"].as_str().map(String::from)
}

/// The run's log so far, an event a line (its `type`, and `name` where
/// it has one), the last 30: what a wait on the run saw.
fn run_log(dir: &Path) -> Vec<String> {
    let text =
        playdeck::store::whole_text(&dir.join(".playdeck/runs/r/events.jsonl")).unwrap_or_default();
    let all: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            let t = e["type"].as_str().unwrap_or("").to_string();
            match e["name"].as_str() {
                Some(n) => format!("{t} {n}"),
                None => t,
            }
        })
        .collect();
    all[all.len().saturating_sub(30)..].to_vec()
}

/// Whether the run's log has `needle` anywhere, with the log as
/// [`run_log`] gives it.
fn log_has(dir: &Path, needle: &str) -> (bool, Vec<String>) {
    let text =
        playdeck::store::whole_text(&dir.join(".playdeck/runs/r/events.jsonl")).unwrap_or_default();
    (text.contains(needle), run_log(dir))
}

/// For a wait ([`wait_for`]): the run's log as [`run_log`] gives it, once
/// it has `needle` anywhere.
fn log_showing(dir: &Path, needle: &str) -> Result<Vec<String>, String> {
    match log_has(dir, needle) {
        (true, log) => Ok(log),
        (false, log) => Err(format!("the run's log: {log:#?}")),
    }
}

/// For a wait ([`wait_for`]): the workers `ctl status` lists, once `done`
/// holds of them.
fn workers_when(dir: &Path, done: impl Fn(&[Value]) -> bool) -> Result<Vec<Value>, String> {
    let ws = workers_in_status(dir);
    if done(&ws) {
        Ok(ws)
    } else {
        Err(format!("ctl status lists: {ws:#?}"))
    }
}

/// Waits for attempt `attempt` of `op` to say its worker; that worker.
fn wait_worker_of(dir: &Path, op: &str, attempt: u32, within: Duration) -> String {
    wait_for(
        &format!("the worker of {op} attempt {attempt}"),
        within,
        || worker_of(dir, op, attempt).ok_or_else(|| format!("the run's log: {:#?}", run_log(dir))),
    )
}

/// Waits until a worker has taken the first attempt of each of the
/// `ops` operations of [`write_play`].
fn wait_every_attempt_taken(d: &Path, ops: usize) {
    wait_for("every attempt taken", Duration::from_secs(30), || {
        let taken: Vec<Option<String>> = (0..ops)
            .map(|i| worker_of(d, &format!("op-{i:02}"), 1))
            .collect();
        if taken.iter().all(Option::is_some) {
            Ok(())
        } else {
            Err(format!(
                "taken: {taken:#?}; the run's log: {:#?}",
                run_log(d)
            ))
        }
    });
}

/// What the workers wrote on stderr, for a failure's message.
fn said(workers: &[&Worker]) -> String {
    workers
        .iter()
        .map(|w| w.said())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The agent `sh` (its prompt, a script, on stdin) of [`held_op`].
const SH_AGENT: &str =
    "[agents.sh]\nbinary = \"sh\"\nstream_format = \"jsonl\"\nprompt_via = \"stdin\"\n";

/// An operation `id` (independent, agent `sh`) that works until the file
/// `release` is there — the test ends it once it has seen what it needs —
/// and succeeds then; it fails if that does not come within `secs`.
fn held_op(id: &str, release: &Path, secs: u32) -> String {
    let r = release.display();
    let ticks = secs * 10;
    format!(
        r#"[[operations]]
id = "{id}"
role = "implementer"
agent = "sh"
independent_root = true
instruction = '''
i=0
while [ ! -e '{r}' ] && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done
[ -e '{r}' ] || {{ echo 'not released in {secs} s' >&2; exit 3; }}
echo '{{"type":"result","result":{{"released":true}}}}'
exit 0
'''
"#
    )
}

#[test]
fn a_plays_operations_spread_over_three_workers() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 12, 1500);
    let workers: Vec<Worker> = (0..3).map(|_| Worker::start(d, &nats, 2)).collect();
    // Nothing is handed out until all three serve: the run starts paused
    // and goes on once ctl status lists them.
    let run = start_run_args(d, &[], &["--paused"]);
    wait_for(
        "the three workers in ctl status",
        Duration::from_secs(30),
        || {
            workers_when(d, |ws| ws.len() == 3)
                .map_err(|ws| format!("{ws}; the run's log: {:#?}", run_log(d)))
        },
    );
    let (text, ok) = playdeck(d, &["ctl", ".playdeck/runs/r", "resume"]);
    assert!(ok, "ctl resume: {text}");
    let (events, code, err) = finish(run, Duration::from_secs(60));
    let all: Vec<&Worker> = workers.iter().collect();
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&all)
    );
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for i in 0..12 {
        let w = worker_of(d, &format!("op-{i:02}"), 1).expect("each op says its worker");
        *by.entry(w).or_default() += 1;
    }
    assert_eq!(by.len(), 3, "{by:?}");
    // Two slots each: nobody took more than it could hold at once, twice.
    assert!(by.values().all(|&n| n <= 6), "{by:?}");
    assert_eq!(of_type(&events, "completed").len(), 12);
    for w in by.keys() {
        assert!(workers.iter().any(|x| x.is(w)), "{w} is none of ours");
    }
}

#[test]
fn a_killed_worker_s_operation_completes_once_elsewhere() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 1, 5000);
    // The victim's silence counts after 3 s.
    let a = Worker::start_losable(d, &nats, 1);
    let b = Worker::start_losable(d, &nats, 1);
    let run = start_run(d);
    let first = wait_worker_of(d, "op-00", 1, Duration::from_secs(20));
    let (victim, other) = if a.is(&first) { (a, b) } else { (b, a) };
    victim.signal(rustix::process::Signal::KILL);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&other])
    );
    let retries = of_type(&events, "retry_scheduled");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0]["category"], "worker_lost");
    assert_eq!(of_type(&events, "completed").len(), 1);
    let second = worker_of(d, "op-00", 2).unwrap();
    assert!(other.is(&second), "{second}");
}

#[test]
fn the_server_restarting_mid_run_is_waited_out() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 4, 4000);
    let w = [Worker::start(d, &nats, 2), Worker::start(d, &nats, 2)];
    let run = start_run(d);
    wait_every_attempt_taken(d, 4);
    // Again at once on the same ports (up() waits out a port not yet let
    // go).
    nats.kill();
    nats.up();
    let (events, code, err) = finish(run, Duration::from_secs(90));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&w[0], &w[1]])
    );
    assert_eq!(of_type(&events, "completed").len(), 4);
}

/// A server restarted without its store (a pod without a volume) has
/// lost every job and the run's frames: the run says so, makes the streams
/// again, counts the attempts in flight lost and attempts them again; the
/// workers make their consumers again and do the work (issue 39).
#[test]
fn a_server_back_without_its_store_is_said_and_the_work_done_again() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 4, 4000);
    let w = [Worker::start(d, &nats, 2), Worker::start(d, &nats, 2)];
    let run = start_run(d);
    wait_every_attempt_taken(d, 4);
    nats.restart_empty();
    let (events, code, err) = finish(run, Duration::from_secs(120));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}\n{}",
        said(&[&w[0], &w[1]]),
        playdeck::store::whole_text(&d.join(".playdeck/runs/r/events.jsonl")).unwrap_or_default()
    );
    assert_eq!(of_type(&events, "completed").len(), 4);
    let text = playdeck::store::whole_text(&d.join(".playdeck/runs/r/events.jsonl")).unwrap();
    assert!(
        text.contains("the NATS server came back without its store")
            && text.contains(
                "attempt(s) in flight lost and attempted again; its streams are made again"
            ),
        "{text}"
    );
    // Each worker finds its consumers made anew once a slot is free to
    // pull again (its earlier attempts end first).
    wait_for(
        "both workers to say the store was lost",
        Duration::from_secs(30),
        || {
            if w.iter()
                .all(|w| w.said().contains("came back without its store"))
            {
                Ok(())
            } else {
                Err(format!("they said: {}", said(&[&w[0], &w[1]])))
            }
        },
    );
}

#[test]
fn a_stopped_worker_is_counted_lost_and_its_late_result_ignored() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 1, 4000);
    let w = Worker::start_losable(d, &nats, 1);
    let run = start_run(d);
    wait_worker_of(d, "op-00", 1, Duration::from_secs(20));
    w.signal(rustix::process::Signal::STOP);
    // Silent past the ack deadline (2 s) and a half, until the run has
    // counted it lost; then it goes on, with a result nobody wants.
    wait_for(
        "the stopped worker counted lost",
        Duration::from_secs(30),
        || {
            let (retry, log) = log_has(d, "\"type\":\"retry_scheduled\"");
            if retry || log_has(d, "worker_lost").0 {
                Ok(())
            } else {
                Err(format!("the run's log: {log:#?}"))
            }
        },
    );
    w.signal(rustix::process::Signal::CONT);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&w])
    );
    let retries = of_type(&events, "retry_scheduled");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0]["category"], "worker_lost");
    assert_eq!(of_type(&events, "completed").len(), 1);
}

#[test]
fn with_no_worker_an_operation_waits_and_says_so() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 1, 200);
    let mut run = start_run(d);
    wait_for("the no-worker warning", Duration::from_secs(30), || {
        log_showing(d, "has taken op-00")
    });
    assert!(run.try_wait().unwrap().is_none(), "the run waits");
    let w = Worker::start(d, &nats, 1);
    let (events, code, err) = finish(run, Duration::from_secs(30));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&w])
    );
    // Not running while no worker had it: its own state (the lane says
    // "◷ waiting for a worker"), and its run time counts from the take.
    let states: Vec<String> = of_type(&events, "agent_activity")
        .iter()
        .map(|e| e["state"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        states.first().map(String::as_str),
        Some("waiting_for_worker"),
        "{states:?}"
    );
    assert!(states.len() > 1, "taken: {states:?}");
    let (json, ok) = playdeck(d, &["report", ".playdeck/runs/r", "--format", "json"]);
    assert!(ok, "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    let op = &report["operations"][0];
    assert!(
        op["waited"].as_f64().unwrap() >= 10.0 && op["ran"].as_f64().unwrap() < 8.0,
        "waited for a worker, then ran 0.2 s: {op}"
    );
}

#[test]
fn a_server_that_is_not_there_is_said_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_held, port) = refused_port();
    std::fs::write(
        d.join("play.toml"),
        format!(
            "[play]\nname = \"x\"\n[cluster]\nnats = \"nats://127.0.0.1:{port}\"\n[palette]\nroles = [{{ role = \"implementer\" }}]\n\
             [[operations]]\nid = \"a\"\nrole = \"implementer\"\ninstruction = \"a\"\n"
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    let (_, code, err) = finish(start_run(d), Duration::from_secs(30));
    assert_ne!(code, 0);
    assert!(err.contains(&format!("nats://127.0.0.1:{port}")), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20));
    // Nothing is left to list or resume.
    let left: Vec<_> = std::fs::read_dir(d.join(".playdeck/runs/r"))
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn credentials_come_from_their_file_and_a_wrong_one_is_refused() {
    let conf = "authorization {\n  user: pd\n  password: \"s3cret-word\"\n}\n";
    let Some(nats) = Nats::start_with(Some(conf)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 2, 300);
    let good = d.join("good.toml");
    std::fs::write(
        &good,
        "user = \"pd\"\npassword = \"s3cret-word\"\nunsigned = true\n",
    )
    .unwrap();
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "user = \"pd\"\npassword = \"not-the-word\"\nunsigned = true\n",
    )
    .unwrap();
    // Without credentials, or with wrong ones, nothing runs, said at once
    // and without the secret.
    for creds in [None, Some(bad.as_path())] {
        let env: Vec<(&str, &Path)> = creds
            .map(|c| ("PLAYDECK_NATS_CREDS", c))
            .into_iter()
            .collect();
        let (_, code, err) = finish(start_run_env(d, &env), Duration::from_secs(30));
        assert_ne!(code, 0, "{err}");
        assert!(err.to_lowercase().contains("authorization"), "{err}");
        assert!(!err.contains("not-the-word"), "{err}");
    }
    // No signing key, and no word of running unsigned: neither a run nor a
    // worker starts, and both say how to make one.
    let nokey = d.join("nokey.toml");
    std::fs::write(&nokey, "user = \"pd\"\npassword = \"s3cret-word\"\n").unwrap();
    let (_, code, err) = finish(
        start_run_env(d, &[("PLAYDECK_NATS_CREDS", &nokey)]),
        Duration::from_secs(30),
    );
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("no signing_key_file: jobs on NATS must be signed")
            && err.contains("head -c 32 /dev/urandom"),
        "{err}"
    );
    let mut refused = Worker::start_env(d, &nats, 1, &[("PLAYDECK_NATS_CREDS", &nokey)]);
    let st = refused.exited_within(Duration::from_secs(30));
    assert!(st.is_some_and(|s| !s.success()), "{}", refused.said());
    assert!(
        refused.said().contains("jobs on NATS must be signed"),
        "{}",
        refused.said()
    );
    let empty = tempfile::tempdir().unwrap();
    let out = common::playdeck()
        .env_remove("PLAYDECK_NATS_CREDS")
        .env("PLAYDECK_CONFIG_DIR", empty.path())
        .args([
            "run",
            "--headless",
            "--run-dir",
            ".playdeck/runs/n",
            "play.toml",
        ])
        .current_dir(d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("there is no credentials file"),
        "{err}"
    );
    let env = [("PLAYDECK_NATS_CREDS", good.as_path())];
    let w = Worker::start_env(d, &nats, 2, &env);
    let (events, code, err) = finish(start_run_env(d, &env), Duration::from_secs(30));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&w])
    );
    // Unsigned, as the file says: said, in the run's log and by the worker.
    let (unsigned, log) = log_has(d, "jobs on NATS are not signed");
    assert!(unsigned, "{log:#?}");
    assert!(w.said().contains("jobs are not signed"), "{}", w.said());
}

/// A run and its workers that share a signing key take nothing unsigned
/// (issue 39): a forged copy of a running job (same subject, permissions
/// and instruction of the forger's choosing) is refused by the worker and
/// never reported, as is one signed with another key; a forged cancel
/// stops nothing; a forged result completes nothing and is said in the
/// run's log. The genuine attempt finishes with its own result.
#[test]
fn jobs_cancels_and_results_that_do_not_verify_are_refused() {
    let Some(nats) = Nats::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("pd.key");
    std::fs::write(
        &key,
        "c2lnbmluZyBrZXkgZm9yIHRoZSB0ZXN0IG9mIGZvcmdlZCBqb2Jz\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let creds = d.join("nats.toml");
    std::fs::write(&creds, "signing_key_file = \"pd.key\"\n").unwrap();
    let env = [("PLAYDECK_NATS_CREDS", creds.as_path())];
    let releases = write_held_play(
        d,
        &format!("[cluster]\nnats = \"{}\"\n", nats.url()),
        &["slow"],
        90,
    );
    let w = Worker::start_env(d, &nats, 2, &env);
    let run = start_run_env(d, &env);
    wait_worker_of(d, "slow", 1, Duration::from_secs(60));
    let nonce = std::fs::read_to_string(d.join(".playdeck/runs/r/cluster.nonce")).unwrap();
    let nonce = nonce.trim();
    let forged = d.join("forged");
    let job = serde_json::json!({
        "run": "r", "play": "spread", "play_hash": "0", "agent": "sh",
        "op_id": 1, "name": "slow", "role": "implementer",
        "instruction": format!("touch '{}'", forged.display()),
        "params": {"tools": {"permission": "full-access"}},
        "context": {}, "attempt": 1, "instance": null, "profile": null,
        "usd_headroom": null
    });
    let token = playdeck::cluster::wire::play_token(
        "spread",
        &playdeck::cluster::wire::play_hash(&std::fs::read_to_string(d.join("play.toml")).unwrap()),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(client.clone());
        let payload = bytes::Bytes::from(serde_json::to_vec(&job).unwrap());
        // The running job's own subject, unsigned.
        js.publish(format!("pd.job.{token}.any.{nonce}.1"), payload.clone())
            .await
            .unwrap()
            .await
            .unwrap();
        // Signed, with another key.
        let other = playdeck::cluster::wire::Signer::new(&[9u8; 32]);
        let subject = format!("pd.job.{token}.any.{nonce}.2");
        let h = other.headers(&subject, &payload).unwrap();
        js.publish_with_headers(subject, h, payload.clone())
            .await
            .unwrap()
            .await
            .unwrap();
        client
            .publish(format!("pd.cancel.{nonce}.1"), "cancel".into())
            .await
            .unwrap();
        let result = serde_json::json!({"t": "result", "worker": "forger", "outcome": {"Ok": {"forged": true}}});
        js.publish(
            format!("pd.out.{nonce}.1"),
            serde_json::to_vec(&result).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
        client.flush().await.unwrap();
    });
    wait_for(
        "the forged result refused in the run's log",
        Duration::from_secs(30),
        || log_showing(d, "was not taken: it is not signed"),
    );
    wait_for(
        "both forged jobs refused by the worker",
        Duration::from_secs(30),
        || {
            let s = w.said();
            if s.contains("it is not signed") && s.contains("its signature does not verify") {
                Ok(())
            } else {
                Err(format!("it said: {s}"))
            }
        },
    );
    // The genuine attempt still runs: nothing completed it, cancelled it
    // or ran the forger's instruction.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!forged.exists(), "the forged job ran: {}", w.said());
    let log = run_log(d);
    assert!(
        !log.iter()
            .any(|l| l == "completed slow" || l == "failed slow"),
        "{log:#?}"
    );
    release(&releases[0]);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        w.said()
    );
    let text = playdeck::store::whole_text(&d.join(".playdeck/runs/r/events.jsonl")).unwrap();
    assert!(
        text.contains("\"released\":true"),
        "the genuine result: {text}"
    );
    assert!(!text.contains("forged"), "{text}");
    assert!(!text.contains("worker_refused"), "{text}");
    assert!(!text.contains("not signed: anyone"), "{text}");
    assert!(!forged.exists());
}

#[test]
fn an_agent_cli_s_output_and_command_line_come_back_to_the_run() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = common::AGENT;
    std::fs::write(
        d.join("play.toml"),
        format!(
            "[play]\nname = \"cli\"\n[cluster]\nnats = \"{}\"\n\
             [agents.a]\nbinary = \"{agent}\"\nstream_format = \"jsonl\"\n\
             [palette]\nroles = [{{ role = \"implementer\" }}]\n\
             [[operations]]\nid = \"far\"\nrole = \"implementer\"\nagent = \"a\"\n\
             instruction = \"work far away\\n@sleep 0.5\\n@stderr remote-err-line\\n@result {{\\\"answer\\\": 42}}\"\n",
            nats.url()
        ),
    )
    .unwrap();
    let w = Worker::start(d, &nats, 1);
    let (events, code, err) = finish(start_run(d), Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&w])
    );
    let done = of_type(&events, "completed");
    assert_eq!(done[0]["result"]["answer"], 42, "{done:?}");
    let logs = d.join(".playdeck/runs/r/logs");
    let stdout = std::fs::read_to_string(logs.join("far.1.stdout.log")).unwrap();
    assert!(!stdout.is_empty());
    let stderr = std::fs::read_to_string(logs.join("far.1.stderr.log")).unwrap();
    assert!(stderr.contains("remote-err-line"), "{stderr}");
    let command: Value =
        serde_json::from_slice(&std::fs::read(logs.join("far.1.command.json")).unwrap()).unwrap();
    assert!(
        command["argv"][0]
            .as_str()
            .unwrap()
            .ends_with("playdeck-agent"),
        "{command}"
    );
    assert!(w.is(command["worker"].as_str().unwrap()), "{command}");
}

/// A worker with another text of the play (a stale checkout) takes none
/// of the run's jobs: it pulls only its own text's. The run says which
/// worker is stale, and a worker with the run's text runs everything;
/// nothing fails `worker_refused` (issue 39).
#[test]
fn a_worker_with_another_text_of_the_play_takes_none_of_its_jobs() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 2, 100);
    let theirs = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(d.join("play.toml")).unwrap();
    std::fs::write(
        theirs.path().join("play.toml"),
        text.replace("instruction = \"work 0\"", "instruction = \"other work\""),
    )
    .unwrap();
    let stale = Worker::start(theirs.path(), &nats, 2);
    let run = start_run(d);
    let log = wait_for(
        "the run to name the stale worker",
        Duration::from_secs(60),
        || log_showing(d, "serves another text of the play: update its checkout"),
    );
    // The attempts wait for a worker: none took them, none failed.
    assert!(
        !log.iter().any(|l| l.starts_with("failed")),
        "nothing failed: {log:#?}"
    );
    for op in ["op-00", "op-01"] {
        assert_eq!(worker_of(d, op, 1), None, "{}", stale.said());
    }
    let good = Worker::start(d, &nats, 2);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&stale, &good])
    );
    for op in ["op-00", "op-01"] {
        let w = worker_of(d, op, 1).expect("a worker recorded");
        assert!(good.is(&w), "{op} ran on {w}");
    }
    let log = playdeck::store::whole_text(&d.join(".playdeck/runs/r/events.jsonl")).unwrap();
    assert!(!log.contains("worker_refused"), "{log}");
}

/// The workers `ctl status --json` lists for the run `r` in `dir` (none
/// when it does not answer).
fn workers_in_status(dir: &Path) -> Vec<Value> {
    let (st, _) = playdeck(dir, &["ctl", ".playdeck/runs/r", "status", "--json"]);
    serde_json::from_str::<Value>(&st)
        .ok()
        .and_then(|v| v["workers"].as_array().cloned())
        .unwrap_or_default()
}

/// `playdeck ARGS…` in `dir`: stdout, and whether it exited 0.
fn playdeck(dir: &Path, args: &[&str]) -> (String, bool) {
    let out = common::playdeck()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

#[test]
fn workers_are_listed_by_ctl_status_runs_and_the_log() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No [cluster]: `--nats` sends it there. The operation runs until the
    // checks below are done (a minute at most).
    let releases = write_held_play(d, "", &["op-00"], 60);
    let a = Worker::start(d, &nats, 1);
    let b = Worker::start_args(d, &nats, 1, &[], &["--tag", "gpu"]);
    // A worker of another play is no capacity of this run's.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join("play.toml"),
        include_str!("../plays/other_play.toml"),
    )
    .unwrap();
    let c = Worker::start(other.path(), &nats, 1);
    let run = start_run_args(d, &[], &["--nats", &nats.url()]);
    let busy_one = wait_worker_of(d, "op-00", 1, Duration::from_secs(20));
    let ws = wait_for(
        "both workers in ctl status",
        Duration::from_secs(15),
        || workers_when(d, |ws| ws.len() == 2),
    );
    assert!(ws.iter().all(|w| w["slots"] == 1), "{ws:?}");
    assert!(
        !ws.iter().any(|w| c.is(w["id"].as_str().unwrap())),
        "{ws:?}"
    );
    let gpu = ws
        .iter()
        .find(|w| b.is(w["id"].as_str().unwrap()))
        .expect("the tagged worker");
    assert_eq!(gpu["tags"], serde_json::json!(["gpu"]));
    // The one performing the operation is busy.
    wait_for(
        "the busy worker counted busy",
        Duration::from_secs(10),
        || {
            workers_when(d, |ws| {
                ws.iter()
                    .any(|w| w["id"] == busy_one.as_str() && w["busy"] == 1)
            })
        },
    );
    let (text, ok) = playdeck(d, &["ctl", ".playdeck/runs/r", "status"]);
    assert!(ok, "{text}");
    assert!(text.contains("workers: 2 · busy 1/2"), "{text}");
    assert!(text.contains("[gpu]") && text.contains("beating"), "{text}");
    let (runs, _) = playdeck(d, &["runs"]);
    assert!(runs.contains("running · 2 workers"), "{runs}");
    // The idle one stops (SIGTERM): it leaves the list at once, not after
    // a minute.
    let (idle, busy) = if a.is(&busy_one) { (b, a) } else { (a, b) };
    idle.signal(rustix::process::Signal::TERM);
    wait_for("the stopped worker gone", Duration::from_secs(10), || {
        workers_when(d, |ws| {
            ws.len() == 1 && busy.is(ws[0]["id"].as_str().unwrap())
        })
    });
    // The run says so in its log (at most every 2 s) before its work ends.
    wait_for(
        "the log's workers event with one worker",
        Duration::from_secs(20),
        || {
            let log = playdeck::store::whole_text(&d.join(".playdeck/runs/r/events.jsonl"))
                .unwrap_or_default();
            let said = log
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["type"] == "workers")
                .map(|e| e["workers"].as_array().map_or(0, Vec::len))
                .collect::<Vec<usize>>();
            if said.last() == Some(&1) {
                Ok(())
            } else {
                Err(format!("its workers events counted: {said:?}"))
            }
        },
    );
    release(&releases[0]);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&busy])
    );
    let counts: Vec<usize> = of_type(&events, "workers")
        .iter()
        .map(|e| e["workers"].as_array().unwrap().len())
        .collect();
    assert!(
        counts.contains(&2) && counts.last() == Some(&1),
        "{counts:?}"
    );
    let log = playdeck::store::whole_text(&d.join(".playdeck/runs/r/events.jsonl")).unwrap();
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["type"], "run_finished",
        "the log ends with the outcome"
    );
    // A resume goes on with the same server.
    assert_eq!(
        std::fs::read_to_string(d.join(".playdeck/runs/r/nats"))
            .unwrap()
            .trim(),
        nats.url()
    );
    drop(c);
}

#[test]
fn max_instances_counts_across_the_cluster() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play_with(
        d,
        &format!(
            "[cluster]\nnats = \"{}\"\n[capacity]\nmax_nodes = 2\n\
             [role_profiles.impl]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\n",
            nats.url()
        ),
        6,
        1500,
    );
    let w: Vec<Worker> = (0..3).map(|_| Worker::start(d, &nats, 4)).collect();
    let (events, code, err) = finish(start_run(d), Duration::from_secs(90));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&w.iter().collect::<Vec<_>>())
    );
    // Twelve slots, two instances: never more than two at once.
    let mut running = 0i32;
    let mut most = 0;
    for e in &events {
        match e["type"].as_str() {
            Some("started") => running += 1,
            Some("completed" | "failed") => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    assert_eq!(most, 2, "at most max_instances at once, and that many");
    assert_eq!(of_type(&events, "completed").len(), 6);
}

/// The run and its workers with `creds` (a credentials file); a run's
/// error, or the events of a run that finished.
fn run_with_creds(d: &Path, nats: &Nats, creds: &Path) -> (Vec<Value>, i32, String) {
    let env = [("PLAYDECK_NATS_CREDS", creds)];
    let w = Worker::start_env(d, nats, 2, &env);
    let (events, code, err) = finish(start_run_env(d, &env), Duration::from_secs(30));
    (events, code, format!("{err}\n{}", w.said()))
}

#[test]
fn an_nkey_seed_file_signs_in_and_another_key_is_refused() {
    let user = nkeys::KeyPair::new_user();
    let conf = format!(
        "authorization {{\n  users = [ {{ nkey: \"{}\" }} ]\n}}\n",
        user.public_key()
    );
    let Some(nats) = Nats::start_with(Some(&conf)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 2, 300);
    let stranger = nkeys::KeyPair::new_user();
    let stranger_seed = stranger.seed().unwrap();
    std::fs::write(d.join("stranger.nk"), &stranger_seed).unwrap();
    std::fs::write(
        d.join("bad.toml"),
        "nkey_seed_file = \"stranger.nk\"\nunsigned = true\n",
    )
    .unwrap();
    let (_, code, err) = finish(
        start_run_env(d, &[("PLAYDECK_NATS_CREDS", &d.join("bad.toml"))]),
        Duration::from_secs(30),
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.to_lowercase().contains("authorization"), "{err}");
    assert!(!err.contains(&stranger_seed), "{err}");
    // A seed file that is not there is named.
    std::fs::write(
        d.join("gone.toml"),
        "nkey_seed_file = \"nowhere.nk\"\nunsigned = true\n",
    )
    .unwrap();
    let (_, code, err) = finish(
        start_run_env(d, &[("PLAYDECK_NATS_CREDS", &d.join("gone.toml"))]),
        Duration::from_secs(30),
    );
    assert_ne!(code, 0);
    assert!(err.contains("nowhere.nk"), "{err}");

    std::fs::write(d.join("user.nk"), user.seed().unwrap()).unwrap();
    std::fs::write(
        d.join("good.toml"),
        "nkey_seed_file = \"user.nk\"\nunsigned = true\n",
    )
    .unwrap();
    let (events, code, err) = run_with_creds(d, &nats, &d.join("good.toml"));
    assert_eq!(outcome(&events), "succeeded", "exit {code}: {err}");
}

/// A certificate authority and a server certificate for 127.0.0.1, made
/// by openssl in `dir`.
fn make_certs(dir: &Path) -> bool {
    let sh = |script: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !sh("command -v openssl") {
        println!("skipped: no openssl to make certificates");
        return false;
    }
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    assert!(sh(&format!(
        "openssl req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj '/CN=playdeck test CA' &&
         openssl req {ec} -keyout server.key -out server.csr -subj '/CN=127.0.0.1' &&
         printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > ext &&
         openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext"
    )));
    true
}

#[test]
fn tls_is_required_and_the_server_is_checked_against_the_ca_file() {
    let certs = tempfile::tempdir().unwrap();
    if server_binary().is_none() || !make_certs(certs.path()) {
        return;
    }
    let c = certs.path();
    let conf = format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n",
        c.join("server.pem").display(),
        c.join("server.key").display()
    );
    let Some(nats) = Nats::start_with(Some(&conf)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_play(d, &nats, 2, 300);
    // TLS without the authority that signed the server: refused, at once.
    std::fs::write(d.join("no-ca.toml"), "tls = true\nunsigned = true\n").unwrap();
    let t0 = Instant::now();
    let (_, code, err) = finish(
        start_run_env(d, &[("PLAYDECK_NATS_CREDS", &d.join("no-ca.toml"))]),
        Duration::from_secs(30),
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains(&nats.url()), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20));
    std::fs::copy(c.join("ca.pem"), d.join("ca.pem")).unwrap();
    std::fs::write(
        d.join("tls.toml"),
        "tls = true\nca_file = \"ca.pem\"\nunsigned = true\n",
    )
    .unwrap();
    let (events, code, err) = run_with_creds(d, &nats, &d.join("tls.toml"));
    assert_eq!(outcome(&events), "succeeded", "exit {code}: {err}");
}

#[test]
fn a_profile_s_worker_tags_send_its_operations_to_tagged_workers_only() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut play = format!(
        "[play]\nname = \"tags\"\nmax_concurrent = 8\n[cluster]\nnats = \"{}\"\n\
         [cluster.worker_tags]\nheavy = [\"gpu\"]\n\
         [capacity]\nmax_nodes = 4\n\
         [role_profiles.heavy]\nrole = \"tester\"\nprovider = \"sim\"\nmax_instances = 2\n\
         [role_profiles.light]\nrole = \"implementer\"\nprovider = \"sim\"\nmax_instances = 2\n\
         [palette]\nroles = [{{ role = \"implementer\" }}, {{ role = \"tester\" }}]\n",
        nats.url()
    );
    for (prefix, role) in [("t", "tester"), ("i", "implementer")] {
        for k in 0..3 {
            play.push_str(&format!(
                "[[operations]]\nid = \"{prefix}-{k}\"\nrole = \"{role}\"\ninstruction = \"{prefix} {k}\"\n\
                 independent_root = true\nsim = {{ duration_ms = 600 }}\n"
            ));
        }
    }
    std::fs::write(d.join("play.toml"), play).unwrap();
    // A plain worker first: the tester's operations wait for a gpu one,
    // and say so.
    let plain = Worker::start(d, &nats, 2);
    let run = start_run(d);
    wait_for(
        "the tagged operations' warning",
        Duration::from_secs(30),
        || log_showing(d, "no worker with tags gpu has taken t-"),
    );
    let gpu = Worker::start_args(d, &nats, 2, &[], &["--tag", "gpu"]);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&plain, &gpu])
    );
    for k in 0..3 {
        let w = worker_of(d, &format!("t-{k}"), 1).unwrap();
        assert!(gpu.is(&w), "t-{k} ran on {w}");
        assert!(worker_of(d, &format!("i-{k}"), 1).is_some());
    }
    assert!(
        (0..3).any(|k| plain.is(&worker_of(d, &format!("i-{k}"), 1).unwrap())),
        "the plain worker took untagged work"
    );
}

#[test]
fn a_resumed_run_takes_back_what_its_killed_process_left_on_workers() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Sent to the cluster by --nats: the resume, given none, goes on there.
    write_play_with(d, "", 1, 20_000);
    let w = Worker::start(d, &nats, 2);
    let mut run = start_run_args(d, &[], &["--nats", &nats.url()]);
    wait_worker_of(d, "op-00", 1, Duration::from_secs(20));
    run.kill().unwrap();
    run.wait().unwrap();
    let mut resumed = common::playdeck()
        .env("PLAYDECK_NATS_CREDS", signed_creds())
        .args(["resume", ".playdeck/runs/r", "--headless"])
        .current_dir(d)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_worker_of(d, "op-00", 2, Duration::from_secs(20));
    // The killed process's attempt is stopped on the worker: one job in
    // hand, not two (it had 20 s to go).
    let busy = || workers_in_status(d).first()?["busy"].as_u64();
    wait_for(
        "the old attempt stopped",
        Duration::from_secs(10),
        || match busy() {
            Some(1) => Ok(()),
            b => Err(format!("busy: {b:?}; the worker said: {}", w.said())),
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(busy(), Some(1), "it stays stopped");
    let _ = resumed.kill();
    let _ = resumed.wait();
    drop(w);
}

#[test]
fn a_git_worktree_profile_s_attempts_get_worktrees_on_the_worker() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An agent that is a shell script: one commits a file, one only looks.
    let play = format!(
        r#"[play]
name = "trees"
[cluster]
nats = "{}"
[palette]
roles = [{{ role = "implementer" }}]
[agents.sh]
binary = "sh"
stream_format = "jsonl"
prompt_via = "stdin"
[capacity]
max_nodes = 2
[role_profiles.coder]
role = "implementer"
provider = "sh"
workspace_mode = "git-worktree"
max_instances = 2
[[operations]]
id = "write"
role = "implementer"
independent_root = true
instruction = '''
echo work > made.txt && git add made.txt && git -c user.name=a -c user.email=a@a commit -qm made
echo "{{\"type\":\"result\",\"result\":{{\"cwd\":\"$(pwd)\"}}}}"
exit 0
'''
[[operations]]
id = "look"
role = "implementer"
independent_root = true
instruction = '''
sleep 0.3
echo "{{\"type\":\"result\",\"result\":{{\"cwd\":\"$(pwd)\"}}}}"
exit 0
'''
"#,
        nats.url()
    );
    std::fs::write(d.join("play.toml"), play).unwrap();
    git(d, &["init", "-q"]);
    git(d, &["add", "play.toml"]);
    git(d, &["commit", "-qm", "play"]);
    let far = tempfile::tempdir().unwrap();
    let far = far.path().canonicalize().unwrap();
    git(&far, &["clone", "-q", d.to_str().unwrap(), "repo"]);
    let checkout = far.join("repo");
    let w = Worker::start(&checkout, &nats, 2);
    // Two real `git worktree add`s on the worker: room on a loaded machine.
    let (events, code, err) = finish(start_run(d), Duration::from_secs(120));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err} {:?}\n{}",
        of_type(&events, "failed"),
        w.said()
    );
    let cwds: Vec<String> = of_type(&events, "completed")
        .iter()
        .map(|e| e["result"]["cwd"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cwds.len(), 2);
    let trees = checkout.join(".playdeck/worker/worktrees/r");
    for c in &cwds {
        assert!(c.starts_with(trees.to_str().unwrap()), "{c}");
    }
    assert_ne!(cwds[0], cwds[1], "one tree per attempt");
    // Both trees are gone; the commit stays on its branch, and the run
    // was told where.
    // The worker removes each tree before it sends the attempt's result;
    // git's own bookkeeping (`worktree list`) may lag a moment behind.
    wait_for("both worktrees gone", Duration::from_secs(30), || {
        let list = git(&checkout, &["worktree", "list"]);
        if list.lines().count() == 1 {
            Ok(())
        } else {
            Err(format!(
                "worktree list: {list}; warnings: {:#?}; the worker said: {}",
                of_type(&events, "warning"),
                w.said()
            ))
        }
    });
    let branches = git(&checkout, &["branch", "--list", "playdeck/*"]);
    assert!(branches.contains("playdeck/r/write.1"), "{branches}");
    assert!(!branches.contains("look"), "{branches}");
    let warned = of_type(&events, "warning").iter().any(|w| {
        w["message"]
            .as_str()
            .unwrap_or("")
            .contains("branch playdeck/r/write.1")
    });
    assert!(warned, "{:?}", of_type(&events, "warning"));
}

#[test]
fn a_stopped_worker_finishes_what_it_took_and_takes_nothing_new() {
    let Some(nats) = Nats::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Each operation works until the test ends it (30 s at most).
    let cluster = format!("[cluster]\nnats = \"{}\"\n", nats.url());
    let ops = ["op-00", "op-01"];
    let releases = write_held_play(d, &cluster, &ops, 30);
    let mut a = Worker::start(d, &nats, 1);
    let run = start_run(d);
    let taken = wait_for("one operation taken", Duration::from_secs(20), || {
        ops.iter()
            .position(|o| worker_of(d, o, 1).is_some())
            .ok_or_else(|| format!("the run's log: {:#?}", run_log(d)))
    });
    let (taken, other) = match taken {
        0 => (0, 1),
        _ => (1, 0),
    };
    // A rollout's SIGTERM: it says it drains, finishes its job and ends.
    a.signal(rustix::process::Signal::TERM);
    wait_for("draining in ctl status", Duration::from_secs(30), || {
        workers_when(d, |ws| ws.first().is_some_and(|w| w["draining"] == true))
            .map_err(|ws| format!("{ws}; the worker said: {}", a.said()))
    });
    assert!(
        a.exited_within(Duration::ZERO).is_none(),
        "it waits for its job\n{}",
        a.said()
    );
    release(&releases[taken]);
    let st = a
        .exited_within(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("it ends once its job is done\n{}", a.said()));
    assert!(st.success(), "{st:?}\n{}", a.said());
    assert!(worker_of(d, ops[other], 1).is_none(), "it took nothing new");
    // Done as soon as the next worker takes it.
    release(&releases[other]);
    let b = Worker::start(d, &nats, 1);
    let (events, code, err) = finish(run, Duration::from_secs(60));
    assert_eq!(
        outcome(&events),
        "succeeded",
        "exit {code}: {err}\n{}",
        said(&[&a, &b])
    );
    assert!(
        of_type(&events, "retry_scheduled").is_empty(),
        "nothing was lost"
    );
    assert_eq!(of_type(&events, "completed").len(), 2);
    assert!(a.is(&worker_of(d, ops[taken], 1).unwrap()));
    assert!(b.is(&worker_of(d, ops[other], 1).unwrap()));
}
