//! Every data directory format a release ever wrote opens with this one: the fixtures of
//! tests/fixtures/format-N/ (written once by `scripts/make-format-fixtures.py`, never again)
//! are unpacked, served by `tessera dev` (standalone, and as the local cluster that wrote them),
//! and must hold exactly the objects their objects.jsonl lists, then take writes; afterwards
//! every data directory is at this build's format (migrated in place).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::tessera_with_input;
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut formats: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/fixtures")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("format-"))
        })
        .collect();
    formats.sort();
    assert!(!formats.is_empty(), "no fixtures in {}", root.display());
    formats
}

/// Numbers as floats, so that `2` and `2.0` compare equal (a float attribute may print either).
fn normalized(v: Value) -> Value {
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64().expect("a number")),
        Value::Array(a) => Value::Array(a.into_iter().map(normalized).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, normalized(v))).collect()),
        other => other,
    }
}

/// Objects by key, from JSON lines.
fn by_key(lines: &str) -> BTreeMap<String, Value> {
    lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (v["id"].as_str().expect("an id").to_owned(), normalized(v))
        })
        .collect()
}

/// Serves the data directory `data` with `tessera dev ARGS` and checks it holds `expected`,
/// waiting (at most a minute) for a cluster's servers to come back; then writes to it.
fn serves(data: &Path, args: &[&str], expected: &BTreeMap<String, Value>) {
    let fixture = data;
    let dev = common::DevServer::start_with(args, data);
    let addr = dev.addr.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = tessera_with_input(&addr, &["search", "hotels"], "");
        let found = by_key(&String::from_utf8_lossy(&o.stdout));
        if o.status.success() && &found == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} with {args:?}: {} objects, expected {}; stderr: {}",
            fixture.display(),
            found.len(),
            expected.len(),
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = tessera_with_input(&addr, &["put", "hotels", "new", r#"{"city": "Rome"}"#], "");
    assert!(o.status.success(), "{o:?}");
    let o = tessera_with_input(&addr, &["get", "hotels", "new"], "");
    assert!(String::from_utf8_lossy(&o.stdout).contains("Rome"), "{o:?}");
    drop(dev); // killed
}

#[test]
fn every_format_ever_written_opens_and_serves() {
    for format in fixtures() {
        let expected = by_key(&std::fs::read_to_string(format.join("objects.jsonl")).unwrap());
        assert!(!expected.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let unpacked = Command::new("tar")
            .arg("-xzf")
            .arg(format.join("data.tar.gz"))
            .arg("-C")
            .arg(dir.path())
            .status()
            .expect("running tar");
        assert!(unpacked.success());
        serves(&dir.path().join("standalone"), &[], &expected);
        serves(&dir.path().join("cluster"), &["--servers", "3"], &expected);
        let marked = migrated(dir.path());
        assert!(marked >= 5, "{}: {marked} FORMAT files", format.display());
    }
}

/// Checks that every data directory under `root` is now at this build's format, and says how
/// many there are.
fn migrated(root: &Path) -> usize {
    use tessera_protocol::data_format::{self, DataKind};
    let mut found = 0;
    for entry in walk(root) {
        if entry
            .file_name()
            .is_some_and(|n| n == data_format::FORMAT_FILE)
        {
            let line = std::fs::read_to_string(&entry).unwrap();
            let (kind, number) = data_format::parse_line(&line).expect("a FORMAT line");
            let kind = match kind {
                "server" => DataKind::Server,
                _ => DataKind::Coordinator,
            };
            assert_eq!(number, kind.current(), "{}", entry.display());
            found += 1;
        }
    }
    found
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
