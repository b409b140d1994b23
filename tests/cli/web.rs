//! `playdeck web` as a user runs it: the real server, a real headless run
//! waiting at a gate, a device paired with `web pair`, the gate approved
//! over HTTP and recorded in the run's log with the device named, a second
//! answer refused as already decided, a process carrying a run's tag
//! refused whatever token it shows, and a revoked device shut out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common;

const PLAY: &str = r#"
[play]
name = "web-gate"
[palette]
roles = [{ role = "implementer" }, { role = "reviewer" }]
[[operations]]
id = "build"
role = "implementer"
instruction = "build it"
[[operations]]
id = "ship"
role = "reviewer"
instruction = "ship it"
depends_on = ["build"]
approval = true
"#;

/// One HTTP/1.1 exchange: (status, head, body).
fn http(
    port: u16,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    body: Option<&str>,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    if let Some(c) = cookie {
        req.push_str(&format!("Cookie: {c}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Origin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        req.push_str("\r\n");
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

#[test]
fn a_paired_phone_approves_a_gate_and_the_run_names_it() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let state = d.join("state");
    std::fs::write(d.join("p.toml"), PLAY).unwrap();
    let mut procs = common::Reaped(Vec::new());
    // The run, waiting at its gate (stdin kept open: headless waits).
    let run = common::headless_waiting(&state, d, "k1", "p.toml");
    procs.0.push(run);
    let events = d.join(".playdeck/runs/k1/events.jsonl");
    common::wait_for("the gate", Duration::from_secs(60), || {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        if log.contains("\"awaiting_approval\"") {
            Ok(())
        } else {
            Err(log)
        }
    });
    // The server, on a port of its choosing.
    let (server, url) = common::web_server(&state, d, &[]);
    procs.0.push(server);
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url:?}"));
    let (s, _, _) = http(port, "GET", "/", None, None);
    assert_eq!(s, 401, "nothing without a device");
    // Paired as the user would: `web pair`, then the address it printed.
    let out = common::playdeck_in_state(&state)
        .args(["web", "pair", "--scope", "decide", "--name", "pixel-7"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    let code = said
        .split("code=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no code in {said}"));
    let (s, head, body) = http(
        port,
        "POST",
        "/api/pair",
        None,
        Some(&format!(r#"{{"code":"{code}"}}"#)),
    );
    assert_eq!(s, 200, "{body}");
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    // What waits, with the basis to decide it on.
    let basis = common::wait_for("the gate on the page", Duration::from_secs(30), || {
        let (_, _, page) = http(port, "GET", "/needs", Some(&cookie), None);
        page.split("data-basis=\"gate@")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .map(|b| format!("gate@{b}"))
            .ok_or(page)
    });
    let approve = format!(r#"{{"cmd":"approve","op":"ship","on":"{basis}"}}"#);
    let (s, _, body) = http(port, "POST", "/api/runs/k1", Some(&cookie), Some(&approve));
    assert_eq!(s, 200, "{body}");
    let (s, _, body) = http(port, "POST", "/api/runs/k1", Some(&cookie), Some(&approve));
    assert!(s == 409 || s == 410, "answered once: {s} {body}");
    // The run records the device, not the web process.
    let by = r#"web (root, device \"pixel-7\", 127.0.0.1)"#;
    let user = std::env::var("USER").unwrap_or_default();
    common::wait_for("the decision in the log", Duration::from_secs(30), || {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        let named = log.lines().any(|l| {
            l.contains("operator_action")
                && l.contains("device \\\"pixel-7\\\", 127.0.0.1)")
                && l.contains("approve ship")
        });
        if named {
            Ok(())
        } else {
            Err(format!("{by} ({user}) not in {log}"))
        }
    });
    // A process carrying a run's tag is refused with the device's cookie.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port}; printf 'GET / HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nCookie: {cookie}\\r\\nConnection: close\\r\\n\\r\\n' >&3; cat <&3"
        ))
        .env("PLAYDECK_RUN_DIR", d.join(".playdeck/runs/k1"))
        .output()
        .unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("agents may not drive runs"), "{answer}");
    // Revoked: shut out at once.
    let out = common::playdeck_in_state(&state)
        .args(["web", "devices"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("pixel-7"));
    let out = common::playdeck_in_state(&state)
        .args(["web", "revoke", "pixel-7"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(http(port, "GET", "/", Some(&cookie), None).0, 401);
}

/// `--tls-cert/--tls-key`: HTTPS with the user's certificate (made here
/// with openssl, checked by curl against it), the device cookie `Secure`;
/// a key that is not one is refused naming the file.
#[test]
fn https_with_a_certificate_of_ones_own() {
    for tool in ["openssl", "curl"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: no {tool} (Debian's {tool}; .ci/run installs openssl)");
            return;
        }
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let state = d.join("state");
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args([
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // A key that is no key: refused before anything listens.
    std::fs::write(d.join("bad.pem"), "not a key\n").unwrap();
    let out = common::playdeck_in_state(&state)
        .args([
            "web",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "cert.pem",
            "--tls-key",
            "bad.pem",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--tls-key bad.pem") && err.contains("private key"),
        "{err}"
    );

    let mut procs = common::Reaped(Vec::new());
    let (server, url) = common::web_server(
        &state,
        d,
        &["--tls-cert", "cert.pem", "--tls-key", "key.pem"],
    );
    procs.0.push(server);
    assert!(url.starts_with("https://"), "{url}");
    let out = common::playdeck_in_state(&state)
        .args(["web", "pair"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = said
        .split("code=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no code in {said}"));
    let curl = |args: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-s", "-i", "--cacert", "cert.pem", "--max-time", "20"])
            .args(args)
            .current_dir(d)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let paired = curl(&[
        "-H",
        &format!("Origin: {url}"),
        "-H",
        "Content-Type: application/json",
        "-d",
        &format!(r#"{{"code":"{code}","name":"laptop"}}"#),
        &format!("{url}/api/pair"),
    ]);
    assert!(paired.starts_with("HTTP/1.1 200"), "{paired}");
    let cookie = paired
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie in {paired}"));
    assert!(cookie.contains("; Secure"), "{cookie}");
    let token = cookie.split(';').next().unwrap();
    let page = curl(&["-H", &format!("Cookie: {token}"), &format!("{url}/")]);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    // A write from the plain-http origin of the same host is not this page's.
    let wrong = curl(&[
        "-H",
        &format!("Cookie: {token}"),
        "-H",
        &format!("Origin: {}", url.replace("https://", "http://")),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"cmd":"pause"}"#,
        &format!("{url}/api/runs/none"),
    ]);
    assert!(wrong.starts_with("HTTP/1.1 403"), "{wrong}");
}
