//! The command line's contract: exit codes (0 success, 1 not found or condition failed,
//! 2 usage or server error), errors on stderr, JSON on stdout, descriptions from files.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{DevServer, TESSERA};

fn tessera(addr: &str, args: &[&str]) -> Output {
    Command::new(TESSERA)
        .args(args)
        .env("TESSERA_ADDR", addr)
        .output()
        .expect("running tessera")
}

fn tessera_stdin(addr: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(TESSERA)
        .args(args)
        .env("TESSERA_ADDR", addr)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn exit_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();

    // A description from a file, with a comment and an int key.
    let file = dir.path().join("people.space");
    std::fs::write(&file, "# people\nspace people\nkey int id\nattributes string name, float height, map(string, int) scores\nsubspace height\n").unwrap();
    let o = tessera(a, &["add-space", file.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = tessera(a, &["add-space", file.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("DUPLICATE"), "{}", stderr(&o));

    let o = tessera_stdin(
        a,
        &["add-space"],
        "space broken\nkey k\nattributes int a\nsubspace b\n",
    );
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("4:10"), "line:column in {}", stderr(&o));

    assert_eq!(
        code(&tessera(
            a,
            &[
                "put",
                "people",
                "7",
                r#"{"name": "Ada", "height": 1.7, "scores": {"go": 3}}"#
            ]
        )),
        0
    );
    let o = tessera(a, &["get", "people", "7"]);
    assert_eq!(code(&o), 0);
    assert_eq!(
        stdout(&o),
        "{\"id\":7,\"name\":\"Ada\",\"height\":1.7,\"scores\":{\"go\":3}}\n"
    );

    // Not found: exit 1, message on stderr, nothing on stdout.
    let o = tessera(a, &["get", "people", "8"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (1, ""));
    assert!(stderr(&o).contains("not found"));
    assert_eq!(code(&tessera(a, &["del", "people", "8"])), 1);

    // Usage and server errors: exit 2.
    let o = tessera(a, &["get", "people", "seven"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("not an int"), "{}", stderr(&o));
    let o = tessera(a, &["put", "people", "7", "{not json"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("invalid JSON"));
    let o = tessera(a, &["search", "nope"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("UNKNOWNSPACE"));
    let o = tessera(a, &["search", "people", "name~("]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("BADPREDICATE"), "{}", stderr(&o));
    assert_eq!(code(&tessera(a, &["get"])), 2);
    let o = tessera("127.0.0.1:1", &["list-spaces"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot reach"));

    // Nothing above changed the object.
    assert_eq!(
        stdout(&tessera(
            a,
            &["search", "people", "height>=1.5", "height<2"]
        )),
        "{\"id\":7,\"name\":\"Ada\",\"height\":1.7,\"scores\":{\"go\":3}}\n"
    );
    assert_eq!(stdout(&tessera(a, &["count", "people"])), "1\n");
    let o = tessera(a, &["list-spaces", "--describe"]);
    assert!(stdout(&o).contains("subspace height"), "{}", stdout(&o));
    assert_eq!(code(&tessera(a, &["rm-space", "people"])), 0);
    assert_eq!(code(&tessera(a, &["rm-space", "people"])), 2);
}

/// `tessera trace` then `tessera advise`: a workload of searches on `city` alone is served
/// best by a subspace of `city` (every other configuration reads every key region, or pays
/// update hops for nothing); the same advice comes from the trace, from the trace's lines in a
/// file, and a bad workload is refused naming its line.
#[test]
fn trace_then_advise() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();
    let o = tessera_stdin(
        a,
        &["add-space"],
        "space hotels key id attributes string city, int stars, int price create 16 partitions",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for n in 0..20 {
        let object = format!(
            r#"{{"city": "c{}", "stars": {}, "price": {}}}"#,
            n % 4,
            n % 5,
            10 * n
        );
        assert_eq!(
            code(&tessera(a, &["put", "hotels", &format!("h{n}"), &object])),
            0
        );
    }
    for _ in 0..60 {
        assert_eq!(code(&tessera(a, &["search", "hotels", "city=c1"])), 0);
    }

    let o = tessera(a, &["trace", "hotels"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0],
        serde_json::json!({"p": 0.75, "search": {"city": "eq"}, "matches": 5.0})
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"p": 0.25, "update": ["city", "price", "stars"]})
    );

    let best = |o: &Output| -> serde_json::Value {
        assert_eq!(code(o), 0, "{}", stderr(o));
        let advice: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        assert_eq!(advice["objects"], 20);
        advice["clusters"][0]["configurations"][0]["subspaces"].clone()
    };
    assert_eq!(
        best(&tessera(a, &["advise", "hotels", "--from-trace"])),
        serde_json::json!([["city"]])
    );
    let file = dir.path().join("workload.jsonl");
    std::fs::write(&file, stdout(&tessera(a, &["trace", "hotels"]))).unwrap();
    assert_eq!(
        best(&tessera(
            a,
            &["advise", "hotels", "--workload", file.to_str().unwrap()]
        )),
        serde_json::json!([["city"]])
    );

    let o = tessera_stdin(
        a,
        &["advise", "hotels", "--workload", "-"],
        "{\"p\": 1, \"get\": true}\n{\"p\": 1, \"search\": {\"town\": \"eq\"}}\n",
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("line 2") && stderr(&o).contains("town"),
        "{}",
        stderr(&o)
    );
    let o = tessera(a, &["advise", "hotels"]);
    assert_eq!(code(&o), 2, "a workload is required");
}

/// `tessera calibrate` measures every kind of micro-workload, fits constants the advisor
/// accepts, leaves no scratch space behind, and `advise --calibration` uses what it saved.
#[test]
fn calibrate_then_advise_with_the_constants() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();
    let saved = dir.path().join("calibration.json");
    let o = tessera(
        a,
        &[
            "calibrate",
            "--objects",
            "200",
            "--seconds",
            "0.3",
            "--concurrency",
            "4",
            "--save",
            saved.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let result: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let m = &result["measurements"];
    assert_eq!(
        (
            m["gets"].as_array().unwrap().len(),
            m["searches"].as_array().unwrap().len(),
            m["writes"].as_array().unwrap().len()
        ),
        (1, 4, 3)
    );
    // The searches' regions as explain counts them for 16 partitions: one slice of g10; one of
    // the 4 x 4 (g100, g10) fixing g100 alone; one fixing both; every key region.
    let regions: Vec<f64> = m["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["regions"].as_f64().unwrap())
        .collect();
    assert_eq!(regions, [1.0, 4.0, 1.0, 16.0]);
    let objects: Vec<f64> = m["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["objects"].as_f64().unwrap())
        .collect();
    assert_eq!(objects, [20.0, 2.0, 2.0, 200.0]);
    for (name, value) in result["calibration"].as_object().unwrap() {
        let v = value.as_f64().unwrap();
        assert!(v.is_finite() && v >= 0.0, "{name} = {v}");
    }
    assert_eq!(
        stdout(&tessera(a, &["list-spaces"])),
        "",
        "the scratch spaces are dropped"
    );

    let o = tessera_stdin(
        a,
        &["add-space"],
        "space hotels key id attributes string city create 16 partitions",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = tessera_stdin(
        a,
        &[
            "advise",
            "hotels",
            "--calibration",
            saved.to_str().unwrap(),
            "--workload",
            "-",
        ],
        "{\"p\": 1, \"search\": {\"city\": \"eq\"}}\n",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let advice: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(advice["calibration"], result["calibration"]);
}
