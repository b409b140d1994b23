//! The served page in a real browser: Debian's Chromium, headless, on a
//! phone-sized window, driven over WebDriver by its ChromeDriver (both
//! installed by `.ci/run`; without them this test says so and skips). A
//! device pairs by its one-time address, watches a gate arrive live on
//! "Needs you", approves it with a tap, and the run's log names the
//! device. With `PLAYDECK_SCREENSHOTS_DIR` set, the pages it passes are
//! saved there as PNGs (README: "Screenshots").

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// A phone's viewport (Pixel 7: 412×915 CSS pixels).
const PHONE: (u32, u32) = (412, 915);
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One HTTP/1.1 exchange with a JSON body: (status, JSON answer).
fn http_json(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    // ChromeDriver keeps the connection open: read what its head says.
    let mut r = BufReader::new(s);
    let mut status = 0;
    let mut length = None;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if line.starts_with("HTTP/") {
            status = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    }
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A WebDriver session on a headless Chromium; the browser and its
/// driver end with it.
struct Browser {
    port: u16,
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        common::wait_for(
            "chromedriver",
            Duration::from_secs(30),
            || match TcpStream::connect(("127.0.0.1", port)) {
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            },
        );
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={},{}", PHONE.0, PHONE.1),
                ],
                "mobileEmulation": {"deviceMetrics": {"width": PHONE.0, "height": PHONE.1, "pixelRatio": 2.0}}
            }
        }}});
        let (s, v) = http_json(port, "POST", "/session", Some(&caps));
        assert_eq!(s, 200, "no browser session: {v}");
        let session = v["value"]["sessionId"].as_str().unwrap().to_string();
        Browser {
            port,
            session,
            driver,
            _profile: profile,
        }
    }

    fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let full = format!("/session/{}{path}", self.session);
        let (s, v) = http_json(self.port, method, &full, body.as_ref());
        assert_eq!(s, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn go(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    /// The first element `css` matches, waiting for it up to `within`.
    fn find(&self, css: &str, within: Duration) -> String {
        let full = format!("/session/{}/element", self.session);
        let query = json!({"using": "css selector", "value": css});
        common::wait_for(css, within, || {
            match http_json(self.port, "POST", &full, Some(&query)) {
                (200, v) => Ok(v["value"][ELEMENT]
                    .as_str()
                    .unwrap_or_else(|| panic!("{v}"))
                    .to_string()),
                _ => Err(self.page_text()),
            }
        })
    }

    /// What the page says, for a failure's message.
    fn page_text(&self) -> String {
        format!(
            "the page: {}",
            self.script("return document.body.innerText")
        )
    }

    fn click(&self, el: &str) {
        self.cmd("POST", &format!("/element/{el}/click"), Some(json!({})));
    }

    fn type_in(&self, el: &str, text: &str) {
        self.cmd(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({"text": text})),
        );
    }

    fn script(&self, js: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": []})),
        )
    }

    /// Waits until `js` returns true.
    fn until(&self, what: &str, js: &str, within: Duration) {
        common::wait_for(what, within, || match self.script(js) {
            Value::Bool(true) => Ok(()),
            _ => Err(self.page_text()),
        });
    }

    /// Saves the window as `name`.png where screenshots are asked for.
    fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("PLAYDECK_SCREENSHOTS_DIR") else {
            return;
        };
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = base64(b64.as_str().unwrap());
        let path = PathBuf::from(dir).join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http_json(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (a screenshot's PNG).
fn base64(text: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = text
        .bytes()
        .filter(|b| *b != b'=' && !b.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | (u32::from(val(c)) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

const PLAY: &str = r#"
[play]
name = "phone-gate"
[palette]
roles = [{ role = "implementer" }, { role = "reviewer" }]
[[operations]]
id = "build"
role = "implementer"
instruction = "build the release"
[[operations]]
id = "ship"
role = "reviewer"
instruction = "ship the release"
depends_on = ["build"]
approval = true
"#;

/// Why the browser tests cannot run here, if they cannot.
fn missing() -> Option<String> {
    (!Path::new(CHROMEDRIVER).exists() || !Path::new(CHROMIUM).exists()).then(|| {
        format!(
            "skipped: no {CHROMIUM} and {CHROMEDRIVER} (Debian's chromium and chromium-driver; .ci/run installs them)"
        )
    })
}

/// `playdeck web` on a port of its own with the state directory `state`,
/// and a phone paired with it (of `scope`, named pixel-7) on its runs page:
/// the server (reaped when dropped), its address and the browser.
fn paired_phone(state: &Path, scope: &str) -> (common::Reaped, String, Browser) {
    let mut procs = common::Reaped(Vec::new());
    let (server, url) = common::web_server(state, &std::env::temp_dir(), &[]);
    procs.0.push(server);
    let out = common::playdeck_in_state(state)
        .args(["web", "pair", "--scope", scope])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let link = said
        .split_whitespace()
        .find(|w| w.contains("/pair?code="))
        .unwrap_or_else(|| panic!("no pairing address in {said}"))
        .to_string();
    let b = Browser::start();
    // Pair: the address `web pair` printed, a name, a tap.
    b.go(&link);
    let name = b.find("#device-name", Duration::from_secs(20));
    b.type_in(&name, "pixel-7");
    b.screenshot("web-pair");
    b.click(&b.find("form.pair button", Duration::from_secs(5)));
    b.until(
        "paired, on the runs page",
        "return location.pathname === '/' && document.querySelector('nav .device') !== null && document.querySelector('nav .device').textContent.includes('pixel-7')",
        Duration::from_secs(20),
    );
    (procs, url, b)
}

#[test]
fn a_phone_pairs_sees_a_gate_arrive_and_approves_it() {
    if let Some(why) = missing() {
        eprintln!("{why}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let state = d.join("state");
    std::fs::write(d.join("p.toml"), PLAY).unwrap();
    let (mut procs, url, b) = paired_phone(&state, "decide");
    b.go(&format!("{url}/needs"));
    b.find("main h1", Duration::from_secs(10));
    // The run starts only now: its gate arrives on the open page.
    let run = common::headless_waiting(&state, d, "k1", "p.toml");
    procs.0.push(run);
    let approve = b.find("article.k-gate button.go", Duration::from_secs(60));
    b.screenshot("web-needs");
    b.click(&approve);
    b.until(
        "the answer said",
        "return document.getElementById('msg').className === 'ok'",
        Duration::from_secs(20),
    );
    // The run names the device that decided.
    let events = d.join(".playdeck/runs/k1/events.jsonl");
    common::wait_for("the approval in the log", Duration::from_secs(30), || {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        let v: Vec<Value> = log
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let by = v.iter().find_map(|e| {
            (e["type"] == "operator_action"
                && e["action"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("approve ship")))
            .then(|| e["by"].as_str().unwrap_or("").to_string())
        });
        match by {
            Some(by)
                if by.starts_with("web (") && by.contains("device \"pixel-7\", 127.0.0.1)") =>
            {
                Ok(())
            }
            _ => Err(log),
        }
    });
    // The card leaves without an error once answered.
    b.until(
        "the card gone",
        "return document.querySelector('article.k-gate') === null",
        Duration::from_secs(30),
    );
    b.go(&format!("{url}/runs/k1"));
    b.until(
        "the run's lanes",
        "return document.querySelector('section.lanes') !== null",
        Duration::from_secs(20),
    );
    b.screenshot("web-run");
    b.go(&format!("{url}/runs/k1/ops/ship"));
    b.find("#opview h1", Duration::from_secs(20));
    b.screenshot("web-op");
}

/// The real claude (from the npm registry, against the scripted model on
/// 127.0.0.1) asks to write a file; the phone sees the call whole on its
/// card and permits it with a tap; the file is written, and the run
/// records the device as who allowed it.
#[test]
fn a_phone_permits_what_the_real_claude_asks() {
    if let Some(why) = missing() {
        eprintln!("{why}");
        return;
    }
    let Some((versions, server)) = crate::realcli::versions_and_server(&crate::realcli::CLAUDE)
    else {
        return;
    };
    // The newest installed claude is enough: the others' questions are
    // proven the same through `ctl` (realcli.rs).
    let (version, exe) = versions.last().unwrap();
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("state");
    let (procs, url, b) = paired_phone(&state, "decide");
    let answer = move |run: PathBuf, op: String| {
        let _procs = procs;
        // The run lives in a HOME of its own: the server learns of it as
        // a run of this user's, from an index entry.
        let index = state.join("playdeck/runs");
        std::fs::create_dir_all(&index).unwrap();
        std::fs::write(
            index.join(run.file_name().unwrap()),
            format!("{}\n", run.display()),
        )
        .unwrap();
        b.go(&format!("{url}/needs"));
        let events = run.join("events.jsonl");
        common::wait_for("claude's question", Duration::from_secs(90), || {
            let log = std::fs::read_to_string(&events).unwrap_or_default();
            if log.contains("\"permission_asked\"") {
                Ok(())
            } else {
                Err(log)
            }
        });
        let permit = b.find("article.k-permission button.go", Duration::from_secs(20));
        let card = b.script("return document.querySelector('article.k-permission').innerText");
        b.screenshot("web-permission");
        b.click(&permit);
        b.until(
            "the answer said",
            "return document.getElementById('msg').className === 'ok'",
            Duration::from_secs(20),
        );
        (Some(0), format!("{op}: {card}"))
    };
    let s = crate::realcli::run_answered(
        &crate::realcli::CLAUDE,
        version,
        exe,
        "ask-web",
        &server,
        Some(Box::new(answer)),
    );
    let (_, card) = s.said.clone().unwrap_or_default();
    assert!(
        card.contains("hello.txt") && card.contains("hi"),
        "the card shows the call whole: {card}"
    );
    assert_eq!(s.outcome, "succeeded", "claude {version}: {}", s.stdout);
    assert_eq!(s.asked.len(), 1, "{:?}", s.asked);
    assert!(s.asked[0].starts_with("Write("), "{:?}", s.asked);
    assert_eq!(s.answered.len(), 1, "{:?}", s.answered);
    let (allowed, by) = &s.answered[0];
    assert!(*allowed, "permitted");
    assert!(
        by.starts_with("web (") && by.contains("device \"pixel-7\", 127.0.0.1)"),
        "who allowed it: {by}"
    );
    assert_eq!(s.file.as_deref().map(str::trim), Some("hi"));
}

/// Who the run's log says did `action` (an `operator_action` whose action
/// starts so), once it does.
fn done_by(events: &Path, action: &str) -> String {
    common::wait_for(action, Duration::from_secs(30), || {
        let log = std::fs::read_to_string(events).unwrap_or_default();
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|e| {
                (e["type"] == "operator_action"
                    && e["action"].as_str().is_some_and(|a| a.starts_with(action)))
                .then(|| e["by"].as_str().unwrap_or("").to_string())
            })
            .ok_or(log)
    })
}

/// A failure and a spend cap on a phone paired to steer: Retry on the
/// failure's card, and a raise typed into the cap's card, each recorded
/// with the device.
#[test]
fn a_phone_retries_a_failure_and_raises_a_cap() {
    if let Some(why) = missing() {
        eprintln!("{why}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let state = d.join("state");
    // The capped play (three operations of 2.50 USD in a chain under a
    // 5 USD cap), two at a time, with one beside them that fails.
    let play = format!(
        "{}[[operations]]\nid = \"flaky\"\nrole = \"implementer\"\ninstruction = \"flaky\"\nindependent_root = true\nsim = {{ duration_ms = 50, outcome = \"fail\" }}\n",
        include_str!("../plays/spend_cap_5_usd.toml")
            .replace("max_concurrent = 1", "max_concurrent = 2")
    );
    std::fs::write(d.join("p.toml"), play).unwrap();
    let (mut procs, url, b) = paired_phone(&state, "steer");
    b.go(&format!("{url}/needs"));
    b.find("main h1", Duration::from_secs(10));
    let run = common::headless_waiting(&state, d, "k2", "p.toml");
    procs.0.push(run);
    let events = d.join(".playdeck/runs/k2/events.jsonl");
    let who = "device \"pixel-7\", 127.0.0.1)";
    // The failure: Retry.
    let retry = b.find("article.k-failure button.go", Duration::from_secs(60));
    b.click(&retry);
    b.until(
        "the retry answered",
        "return document.getElementById('msg').className === 'ok'",
        Duration::from_secs(20),
    );
    let by = done_by(&events, "retry flaky");
    assert!(by.starts_with("web (") && by.contains(who), "{by}");
    // The cap: its numbers are on the card; a raise typed in.
    let raise_box = b.find("article.k-spendcap input", Duration::from_secs(60));
    let card = b.script("return document.querySelector('article.k-spendcap').innerText");
    assert!(card.as_str().is_some_and(|c| c.contains("5.00")), "{card}");
    b.screenshot("web-spend-cap");
    b.type_in(&raise_box, "usd=+5");
    b.click(&b.find("article.k-spendcap button", Duration::from_secs(5)));
    b.until(
        "the raise answered",
        "return document.getElementById('msg').className === 'ok' && document.getElementById('msg').textContent.includes('usd')",
        Duration::from_secs(20),
    );
    let by = done_by(&events, "budget");
    assert!(by.starts_with("web (") && by.contains(who), "{by}");
}

/// A review sent back from a phone with a note: the operation's agent (a
/// shell that names its conversation and keeps what it is told in
/// note.txt) hears it, its work comes back for review with the note, and
/// the run names the device.
#[test]
fn a_phone_sends_a_review_back() {
    if let Some(why) = missing() {
        eprintln!("{why}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("repo");
    std::fs::create_dir_all(&d).unwrap();
    let state = t.path().join("state");
    common::git(&d, &["init", "-q", "-b", "main"]);
    let play = r#"[play]
name = "phone-review"
[palette]
roles = [{ role = "implementer", agent = "sh" }]
[agents.sh]
binary = "sh"
stream_format = "jsonl"
prompt_via = "stdin"
[workspace]
isolation = "worktree"
[[operations]]
id = "a"
role = "implementer"
agent = "sh"
review = true
instruction = '''
echo '{"type":"session","id":"s-1"}'
n=$(cat "$PLAYDECK_RUN_DIR/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$PLAYDECK_RUN_DIR/count"
echo "attempt $n" > a.txt
echo '{"type":"result","result":{"ok":true}}'
sed -n '/^The operator says: /,$p' > note.txt <<'REST'
'''
"#;
    std::fs::write(d.join("p.toml"), play).unwrap();
    std::fs::write(d.join(".gitignore"), ".playdeck/\n").unwrap();
    common::git(&d, &["add", "."]);
    common::git(&d, &["commit", "-q", "-m", "the play"]);
    let (mut procs, url, b) = paired_phone(&state, "decide");
    let run = common::headless_waiting(&state, &d, "k3", "p.toml");
    procs.0.push(run);
    b.go(&format!("{url}/needs"));
    let note = b.find("article.k-review input", Duration::from_secs(60));
    b.screenshot("web-review");
    b.type_in(&note, "use a longer greeting");
    b.click(&b.find(
        "article.k-review button[data-words=text]",
        Duration::from_secs(5),
    ));
    b.until(
        "the send-back answered",
        "return document.getElementById('msg').className === 'ok'",
        Duration::from_secs(20),
    );
    let events = d.join(".playdeck/runs/k3/events.jsonl");
    let by = done_by(&events, "say a");
    assert!(
        by.starts_with("web (") && by.contains("device \"pixel-7\", 127.0.0.1)"),
        "{by}"
    );
    // Its work comes back for review, with the note it was told.
    common::wait_for("the second review", Duration::from_secs(60), || {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        let reviews = log
            .lines()
            .filter(|l| l.contains("\"permission_asked\"") && l.contains("\"review\""))
            .count();
        if reviews >= 2 && log.contains("note.txt") {
            Ok(())
        } else {
            Err(log)
        }
    });
}
