//! Metrics and logs (issue "Operating and using Tessera", item 1): a daemon started with
//! `--http ADDR` serves Prometheus text at /metrics whose counts match what the test did, to a
//! standalone `tessera dev` and to a local cluster (Raft's gauges); `--log-format json` logs a
//! refused request once, as JSON, with its cause. A daemon started with `--auth` asks the HTTP
//! port's callers for a token of its file too.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{tessera_with_input as tessera, Daemon};

/// The status line and body of `METHOD PATH` at `http`.
fn http(http: &str, method: &str, path: &str) -> (String, String) {
    let (head, body) = http_with(http, method, path, "");
    (head.lines().next().unwrap().to_owned(), body)
}

/// The head and body of `METHOD PATH` at `http`, sending the header lines `headers` (each
/// ending in CRLF).
fn http_with(http: &str, method: &str, path: &str, headers: &str) -> (String, String) {
    let mut tcp = TcpStream::connect(http).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        tcp,
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    (head.to_owned(), body.to_owned())
}

/// The value of the series `name{labels}` exactly as written (labels in the exporter's order).
fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

fn start(args: &[&str], data: &Path) -> (Daemon, String) {
    let http = format!("127.0.0.1:{}", common::free_port());
    let mut all = args.to_vec();
    all.extend(["--http", &http, "--data-dir"]);
    (Daemon::start(&all, data), http)
}

#[test]
fn a_standalone_daemon_counts_what_it_served() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, http_addr) = start(&["dev", "--listen", "127.0.0.1:0"], &dir.path().join("d"));
    let a = dev.addr.as_str();
    let o = tessera(
        a,
        &["add-space"],
        "space h key id attributes string city, int price subspace city, price",
    );
    assert!(o.status.success());
    for n in 0..3 {
        let o = tessera(
            a,
            &[
                "put",
                "h",
                &format!("k{n}"),
                &format!(r#"{{"city": "a", "price": {n}}}"#),
            ],
            "",
        );
        assert!(o.status.success());
    }
    // `city` fixed: 8 of the 64 regions of `city, price`.
    let o = tessera(a, &["search", "h", "city=a"], "");
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 3);
    // Refused by the server: a space that does not exist.
    let o = tessera(a, &["rm-space", "nosuch"], "");
    assert_eq!(o.status.code(), Some(2));

    let (status, metrics) = http(&http_addr, "GET", "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{metrics}");
    let s = r#"server="1""#;
    let ok_puts = value(
        &metrics,
        &format!(r#"tessera_requests_total{{{s},op="put",status="OK"}}"#),
    );
    assert_eq!(ok_puts, Some(3.0), "{metrics}");
    let refused = format!(r#"tessera_requests_total{{{s},op="rm_space",status="UNKNOWNSPACE"}}"#);
    assert_eq!(value(&metrics, &refused), Some(1.0), "{metrics}");
    assert_eq!(
        value(
            &metrics,
            &format!(r#"tessera_request_seconds_count{{{s},op="add_space"}}"#)
        ),
        Some(1.0),
        "{metrics}"
    );
    // 64 regions in each of the space's two subspaces, all on this server, 3 objects in each.
    for subspace in ["0", "1"] {
        let labels = format!(r#"{s},space="h",subspace="{subspace}""#);
        assert_eq!(
            value(&metrics, &format!("tessera_regions{{{labels}}}")),
            Some(64.0)
        );
        assert_eq!(
            value(&metrics, &format!("tessera_entries{{{labels}}}")),
            Some(3.0),
            "{metrics}"
        );
    }
    let commits = value(
        &metrics,
        &format!("tessera_group_commit_writes_count{{{s}}}"),
    )
    .unwrap();
    let written = value(&metrics, &format!("tessera_group_commit_writes_sum{{{s}}}")).unwrap();
    assert!(commits >= 1.0 && written >= 3.0, "{metrics}");
    assert!(
        metrics.contains("tessera_group_commit_seconds_bucket"),
        "{metrics}"
    );

    assert_eq!(
        http(&http_addr, "POST", "/metrics").0,
        "HTTP/1.1 405 Method Not Allowed"
    );
    assert_eq!(
        http(&http_addr, "GET", "/nothing").0,
        "HTTP/1.1 404 Not Found"
    );
}

#[test]
fn a_local_cluster_reports_raft_and_its_servers() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, http_addr) = start(
        &[
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--servers",
            "3",
            "--coordinators",
            "3",
        ],
        &dir.path().join("d"),
    );
    let o = tessera(&dev.addr, &["status"], "");
    assert!(o.status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, metrics) = http(&http_addr, "GET", "/metrics");
        let leaders: f64 = (1..=3)
            .filter_map(|c| {
                value(
                    &metrics,
                    &format!(r#"tessera_raft_leader{{coordinator="{c}"}}"#),
                )
            })
            .sum();
        let term = value(&metrics, r#"tessera_raft_term{coordinator="1"}"#).unwrap_or(0.0);
        let available = value(
            &metrics,
            r#"tessera_servers{coordinator="1",state="available"}"#,
        )
        .unwrap_or(0.0);
        let servers_known =
            (1..=3).all(|n| metrics.contains(&format!(r#"tessera_epoch{{server="{n}"}}"#)));
        if leaders == 1.0 && term >= 1.0 && available == 3.0 && servers_known {
            break;
        }
        assert!(Instant::now() < deadline, "{metrics}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_refused_request_is_logged_once_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let http = format!("127.0.0.1:{}", common::free_port());
    let mut child = Command::new(common::TESSERA)
        .args([
            "--log-format",
            "json",
            "--log",
            "info",
            "dev",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--http", &http, "--data-dir"])
        .arg(dir.path().join("d"))
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let addr = ready
        .split("ready on ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let o = tessera(addr, &["rm-space", "nosuch"], "");
    assert_eq!(o.status.code(), Some(2));
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let refused: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["fields"]["message"] == "request refused")
        .collect();
    assert_eq!(refused.len(), 1, "{text}");
    assert_eq!(refused[0]["fields"]["op"], "rm_space", "{text}");
    assert_eq!(refused[0]["fields"]["status"], "UNKNOWNSPACE", "{text}");
    assert!(
        refused[0]["fields"]["cause"]
            .as_str()
            .unwrap()
            .contains("nosuch"),
        "{text}"
    );
    // Every line of the log is JSON.
    assert!(text
        .lines()
        .filter(|l| l.starts_with('{'))
        .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
    assert!(
        text.lines().any(|l| l.contains(r#""message":"serving""#)),
        "{text}"
    );
}

#[test]
fn with_tokens_the_http_port_wants_one() {
    const READER: &str = "reader-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{READER} read\n")).unwrap();
    let (_dev, http_addr) = start(
        &[
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--auth",
            tokens.to_str().unwrap(),
        ],
        &dir.path().join("d"),
    );
    let bearer = format!("Authorization: Bearer {READER}\r\n");
    for path in ["/metrics", "/api/cluster"] {
        let (head, body) = http_with(&http_addr, "GET", path, "");
        assert!(head.starts_with("HTTP/1.1 401"), "{path}: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("www-authenticate: bearer realm=\"tessera\""),
            "{head}"
        );
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .contains("Authorization: Bearer"),
            "{body}"
        );
        let wrong = "Authorization: Bearer reader-token-0123456780\r\n";
        let (head, body) = http_with(&http_addr, "GET", path, wrong);
        assert!(head.starts_with("HTTP/1.1 401"), "{path}: {head}");
        assert!(body.contains("unknown token"), "{body}");
        let (head, body) = http_with(&http_addr, "GET", path, &bearer);
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        assert!(
            body.contains("tessera_epoch") || body.contains("\"servers\""),
            "{path}: {body}"
        );
    }
    // The page itself holds no data: served to anyone, it asks for the token.
    let (status, page) = http(&http_addr, "GET", "/");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(page.contains("id=\"token\""));
}
