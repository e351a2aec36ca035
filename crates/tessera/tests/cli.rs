//! The command line's contract: exit codes (0 success, 1 not found or condition failed,
//! 2 usage or server error), errors on stderr, JSON on stdout, descriptions from files.

mod common;

use std::process::{Command, Output, Stdio};

use common::{tessera_with_input as tessera_stdin, DevServer, TESSERA};

fn tessera(addr: &str, args: &[&str]) -> Output {
    Command::new(TESSERA)
        .args(args)
        .env("TESSERA_ADDR", addr)
        .output()
        .expect("running tessera")
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

    // get-many: a line per key in order, null for a key with none; a bad key fails it all.
    let o = tessera(a, &["get-many", "people", "8", "7", "7"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ada = "{\"id\":7,\"name\":\"Ada\",\"height\":1.7,\"scores\":{\"go\":3}}";
    assert_eq!(stdout(&o), format!("null\n{ada}\n{ada}\n"));
    let o = tessera(a, &["get-many", "people", "7", "seven"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (2, ""));
    assert!(stderr(&o).contains("not an int"), "{}", stderr(&o));
    assert_eq!(code(&tessera(a, &["get-many", "people"])), 2);

    // put-many: a line per object, reported in order; a failed put leaves the others stored.
    // (The second object is over the server's object limit: refused there, not here.)
    let huge = "x".repeat(tessera_types::constants::OBJECT_BYTES_MAX + 10);
    let lines = format!(
        "{{\"id\": 20, \"name\": \"Bo\"}}\n\n{{\"id\": 21, \"name\": \"{huge}\"}}\n{{\"id\": 22, \"height\": 1.9}}\n"
    );
    let o = tessera_stdin(a, &["put-many", "people"], &lines);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let report: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(report.len(), 3, "{report:?}");
    assert_eq!(report[0], "{\"key\":20,\"ok\":true}");
    assert!(
        report[1].starts_with("{\"key\":21,\"error\":") && report[1].contains("TOOLARGE"),
        "{}",
        report[1]
    );
    assert_eq!(report[2], "{\"key\":22,\"ok\":true}");
    assert!(stderr(&o).contains("1 of 3 puts failed"), "{}", stderr(&o));
    let o = tessera(a, &["get-many", "people", "20", "21", "22"]);
    assert_eq!(
        stdout(&o),
        "{\"id\":20,\"name\":\"Bo\",\"height\":0.0,\"scores\":{}}\nnull\n{\"id\":22,\"name\":\"\",\"height\":1.9,\"scores\":{}}\n"
    );
    // A malformed line stops everything before anything is written.
    let o = tessera_stdin(
        a,
        &["put-many", "people"],
        "{\"id\": 30}\n{\"name\": \"no key\"}\n",
    );
    assert_eq!((code(&o), stdout(&o).as_str()), (2, ""));
    assert!(
        stderr(&o).contains("line 2") && stderr(&o).contains("no key attribute"),
        "{}",
        stderr(&o)
    );
    assert_eq!(code(&tessera(a, &["get", "people", "30"])), 1);
    let o = tessera_stdin(
        a,
        &["put-many", "people"],
        "{\"id\": 30}\n{\"id\": 31, \"name\": 5}\n",
    );
    assert_eq!((code(&o), stdout(&o).as_str()), (2, ""));
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
    assert_eq!(code(&tessera(a, &["get", "people", "30"])), 1);
    for key in ["20", "22"] {
        assert_eq!(code(&tessera(a, &["del", "people", key])), 0);
    }

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
        (1, 8, 4)
    );
    // Besides: one client alone for the round trip, every write run's fsyncs, searches and
    // writes mixed half and half, and what every run (2 of gets, 8 of searches, 4 of writes,
    // the mix) tells of the client and the cores.
    assert_eq!(m["round_trips_s"].as_array().unwrap().len(), 1);
    assert_eq!(m["fsyncs"].as_array().unwrap().len(), 4);
    let mixes = m["mixes"].as_array().unwrap();
    assert_eq!(mixes.len(), 1);
    let shares: Vec<f64> = mixes[0]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[0].as_f64().unwrap())
        .collect();
    assert_eq!(shares, [0.5, 0.5]);
    assert_eq!(m["runs"].as_array().unwrap().len(), 15);
    let c = &result["calibration"];
    assert!(c["fsync_s"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["server_cores"].as_f64().unwrap() >= 1.0, "{c}");
    // The searches' regions as explain counts them for 16 partitions: one slice of g10; one of
    // the 4 x 4 (g100, g10) fixing g100 alone; one fixing both (it runs in {g10}); every key
    // region; then c in the 4 x 4 {c, u}, w in the 3 x 3 x 2 {w, u, v} (6), w and u (2), and
    // a point.
    let regions: Vec<f64> = m["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["regions"].as_f64().unwrap())
        .collect();
    assert_eq!(regions, [1.0, 4.0, 1.0, 16.0, 4.0, 6.0, 2.0, 1.0]);
    let objects: Vec<f64> = m["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["objects"].as_f64().unwrap())
        .collect();
    // g100 = 1 and g10 = 1 reads the 20 objects of g10 = 1 in {g10}, not the 2 it returns;
    // c1 is 4 of the 200 objects (k mod 50), w1 5 (k mod 47).
    assert_eq!(objects, [20.0, 2.0, 20.0, 200.0, 4.0, 5.0, 1.0, 1.0]);
    // Entries skipped: only the boxes that leave some dimensions of a multi-dimensional
    // subspace open: g100 alone in (g100, g10), c, w, and w and u.
    let skips: Vec<bool> = m["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["skipped"].as_f64().unwrap() > 0.0)
        .collect();
    assert_eq!(skips, [false, true, false, false, true, true, true, false]);
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

    // Kept with the configuration, too (in whole nanoseconds): status shows them, and advise
    // uses them without --calibration.
    let status: serde_json::Value =
        serde_json::from_str(&stdout(&tessera(a, &["status", "--json"]))).unwrap();
    let fitted = &result["calibration"];
    let ns = |name: &str| (fitted[name].as_f64().unwrap() * 1e9).round();
    assert_eq!(
        status["model"]["write_hop_ns"].as_f64(),
        Some(ns("write_hop_s"))
    );
    assert_eq!(
        status["model"]["search_region_ns"].as_f64(),
        Some(ns("search_region_s"))
    );
    let o = tessera_stdin(
        a,
        &["advise", "hotels", "--workload", "-"],
        "{\"p\": 1, \"search\": {\"city\": \"eq\"}}\n",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let kept: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for name in [
        "write_base_s",
        "write_hop_s",
        "get_s",
        "search_region_s",
        "search_object_s",
        "search_skip_s",
    ] {
        let (got, want) = (
            kept["calibration"][name].as_f64().unwrap(),
            fitted[name].as_f64().unwrap(),
        );
        assert!((got - want).abs() <= 1e-9, "{name}: {got} against {want}");
    }
}

/// The hotels of the alter-space tests: 20 objects over 16 partitions, subspace 1 (city,
/// price); returns (key, city, stars, price) of each, as stored.
fn hotels_for_alter(a: &str) -> Vec<(String, String, i64, i64)> {
    let o = tessera_stdin(
        a,
        &["add-space"],
        "space hotels key id attributes string city, int stars, int price \
         subspace city, price create 16 partitions",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let hotels: Vec<(String, String, i64, i64)> = (0..20)
        .map(|n| (format!("h{n}"), format!("c{}", n % 4), n % 5, 10 * n))
        .collect();
    for (key, city, stars, price) in &hotels {
        let object = format!(r#"{{"city": "{city}", "stars": {stars}, "price": {price}}}"#);
        let o = tessera(a, &["put", "hotels", key, &object]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    hotels
}

/// The keys `tessera search hotels PREDICATES` prints, sorted.
fn searched_keys(a: &str, predicates: &[&str]) -> Vec<String> {
    let mut args = vec!["search", "hotels"];
    args.extend_from_slice(predicates);
    let o = tessera(a, &args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut keys: Vec<String> = stdout(&o)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_owned()
        })
        .collect();
    keys.sort();
    keys
}

/// The keys of the hotels `keep` selects, sorted: what a search must find.
fn expected_keys(
    hotels: &[(String, String, i64, i64)],
    keep: impl Fn(&(String, String, i64, i64)) -> bool,
) -> Vec<String> {
    let mut keys: Vec<String> = hotels
        .iter()
        .filter(|h| keep(h))
        .map(|h| h.0.clone())
        .collect();
    keys.sort();
    keys
}

fn status_json(a: &str) -> serde_json::Value {
    let o = tessera(a, &["status", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// `tessera alter-space`: refusals exit 2 with a message naming what is wrong and change
/// nothing; an added subspace shows in `tessera status` (building, with its progress, or
/// serving once built) and a dropped one shows dropped, keeping its id; searches find the
/// same objects throughout. Passes whether or not the build completes (see
/// `alter_space_builds_then_serves` for that).
#[test]
fn alter_space_errors_add_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();
    let hotels = hotels_for_alter(a);
    let epoch = status_json(a)["epoch"].clone();

    for (args, wanted) in [
        (
            &["alter-space", "hotels", "add-subspace", "nope"][..],
            "BADALTER",
        ),
        (
            &["alter-space", "hotels", "add-subspace", "price,city"],
            "subspace 1 spans those attributes already",
        ),
        (
            &["alter-space", "hotels", "add-subspace", "stars,stars"],
            "BADALTER",
        ),
        (&["alter-space", "hotels", "add-subspace", "id"], "BADALTER"),
        (
            &["alter-space", "hotels", "drop-subspace", "0"],
            "key subspace",
        ),
        (
            &["alter-space", "hotels", "drop-subspace", "9"],
            "no subspace 9",
        ),
        (
            &["alter-space", "nope", "drop-subspace", "1"],
            "UNKNOWNSPACE",
        ),
        // Usage errors.
        (&["alter-space", "hotels", "add-subspace"], "ATTRIBUTES"),
        (&["alter-space", "hotels", "drop-subspace", "x"], "invalid"),
        (
            &[
                "alter-space",
                "hotels",
                "add-subspace",
                "stars",
                "--wait-timeout",
                "1",
            ],
            "--wait",
        ),
        (&["alter-space", "hotels", "rename"], "unexpected argument"),
    ] {
        let o = tessera(a, args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains(wanted), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "", "{args:?}");
    }
    let o = tessera(a, &["alter-space", "hotels", "add-subspace", "nope"]);
    assert!(
        stderr(&o).starts_with("error: cannot alter space \"hotels\": BADALTER (8019): ")
            && stderr(&o).contains("nope"),
        "{}",
        stderr(&o)
    );
    let status = status_json(a);
    assert_eq!(status["epoch"], epoch, "nothing changed");
    assert_eq!(
        status["spaces"][0]["subspace_list"],
        serde_json::json!([
            {"id": 0, "attributes": ["id"], "state": "serving", "regions": 16, "cut_by_data": false},
            {"id": 1, "attributes": ["city", "price"], "state": "serving", "regions": 16, "cut_by_data": false},
        ])
    );
    assert_eq!(status["spaces"][0]["build"], serde_json::Value::Null);
    let help = stdout(&tessera(a, &["alter-space", "--help"]));
    for words in [
        "built from the objects already stored",
        "32 subspace ids",
        "--wait",
        "never reused",
    ] {
        assert!(help.contains(words), "{words:?} in {help}");
    }

    // Subspace 2 (stars) added: it is building (or built already, the space is small).
    let o = tessera(a, &["alter-space", "hotels", "add-subspace", "stars"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("added subspace 2 (stars) to hotels"),
        "{}",
        stdout(&o)
    );
    let status = status_json(a);
    let space = &status["spaces"][0];
    let added = &space["subspace_list"][2];
    assert_eq!(
        (&added["id"], &added["attributes"]),
        (&2.into(), &serde_json::json!(["stars"]))
    );
    // Cut from the statistics of the objects it is built from: one region per star count
    // (0 to 4, four hotels each), not 16 equal slices of the int axis, all but one empty.
    assert_eq!(
        (&added["cut_by_data"], &added["regions"]),
        (&true.into(), &5.into()),
        "{added}"
    );
    match added["state"].as_str().unwrap() {
        "building" => {
            assert_eq!(added["key_regions"], 16);
            assert!(added["backfilled"].as_u64().unwrap() < 16);
            assert_eq!(space["build"]["subspace"], 2);
            assert_eq!(space["build"]["total"], 16);
        }
        "serving" => assert_eq!(space["build"], serde_json::Value::Null),
        other => panic!("subspace 2 is {other}"),
    }
    assert_eq!(space["subspaces"], 3);
    let text = stdout(&tessera(a, &["status"]));
    assert!(text.contains("    subspace 0: id (serving)\n"), "{text}");
    assert!(text.contains("    subspace 2: stars ("), "{text}");
    // Searches go on, and find what they found before.
    assert_eq!(
        searched_keys(a, &["stars=3"]),
        expected_keys(&hotels, |h| h.2 == 3)
    );

    // Subspace 1 dropped: it keeps its id, shows dropped, and searches on city still work.
    let o = tessera(
        a,
        &["alter-space", "hotels", "drop-subspace", "1", "--json"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let dropped: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(dropped["action"], "drop-subspace");
    assert_eq!(dropped["id"], 1);
    assert_eq!(dropped["state"], "dropped");
    assert_eq!(dropped["attributes"], serde_json::json!(["city", "price"]));
    let status = status_json(a);
    let space = &status["spaces"][0];
    assert_eq!(space["subspace_list"][1]["state"], "dropped");
    assert_eq!(space["subspaces"], 2);
    let text = stdout(&tessera(a, &["status"]));
    assert!(
        text.contains("    subspace 1: city, price (dropped)\n"),
        "{text}"
    );
    assert!(
        text.contains("hotels           2 replicas, 2 subspaces"),
        "{text}"
    );
    let described = stdout(&tessera(a, &["list-spaces", "--describe"]));
    assert!(
        described.contains("# subspace 1: city, price (dropped)\n"),
        "{described}"
    );
    assert!(
        !described.contains("\nsubspace city, price\n"),
        "{described}"
    );
    assert!(described.contains("\nsubspace stars\n"), "{described}");
    assert_eq!(
        searched_keys(a, &["city=c1", "price<=100"]),
        expected_keys(&hotels, |h| h.1 == "c1" && h.3 <= 100)
    );
    let o = tessera(a, &["explain", "hotels", "city=c1"]);
    let explained: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_ne!(
        explained["subspace"], 1,
        "a dropped subspace serves no search"
    );
    let o = tessera(a, &["alter-space", "hotels", "drop-subspace", "1"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no subspace 1"), "{}", stderr(&o));
    // Writes go on.
    assert_eq!(
        code(&tessera(a, &["put", "hotels", "h3", r#"{"city": "c9"}"#])),
        0
    );
    assert_eq!(searched_keys(a, &["city=c9"]), ["h3"]);
}

/// Needs the server-side backfill: an added subspace is built from the existing objects and
/// then serves searches (`--wait` blocks until then); a dropped id is not reused.
#[test]
fn alter_space_builds_then_serves() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();
    let hotels = hotels_for_alter(a);

    let o = tessera(
        a,
        &[
            "alter-space",
            "hotels",
            "add-subspace",
            "stars",
            "--wait",
            "--wait-timeout",
            "60",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("added subspace 2 (stars) to hotels"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("subspace 2 (stars) of hotels is built and serves searches"),
        "{lines:?}"
    );
    let text = stdout(&tessera(a, &["status"]));
    assert!(text.contains("    subspace 2: stars (serving)\n"), "{text}");
    assert_eq!(
        status_json(a)["spaces"][0]["build"],
        serde_json::Value::Null
    );
    let o = tessera(a, &["explain", "hotels", "stars=3"]);
    let explained: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(explained["subspace"], 2, "{explained}");
    assert_eq!(
        searched_keys(a, &["stars=3"]),
        expected_keys(&hotels, |h| h.2 == 3)
    );
    assert_eq!(
        searched_keys(a, &["stars>=2", "price<150"]),
        expected_keys(&hotels, |h| h.2 >= 2 && h.3 < 150)
    );

    // Dropped ids are not reused: after dropping 1, the next subspace is 3.
    assert_eq!(
        code(&tessera(
            a,
            &["alter-space", "hotels", "drop-subspace", "1"]
        )),
        0
    );
    let o = tessera(
        a,
        &[
            "alter-space",
            "hotels",
            "add-subspace",
            "city",
            "--wait",
            "--json",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let added: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (&added["action"], &added["id"], &added["state"]),
        (&"add-subspace".into(), &3.into(), &"serving".into())
    );
    let o = tessera(a, &["explain", "hotels", "city=c2"]);
    let explained: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(explained["subspace"], 3, "{explained}");
    assert_eq!(
        searched_keys(a, &["city=c2"]),
        expected_keys(&hotels, |h| h.1 == "c2")
    );
}

/// Needs the server-side backfill: `tessera advise --apply` makes the best configuration the
/// space's (adds what it lacks, waiting for each build, then drops what it does not have) and
/// prints each change as a JSON line after the advice; applied again, it changes nothing.
#[test]
fn advise_apply_changes_the_subspaces() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();
    let hotels = hotels_for_alter(a);
    let workload = "{\"p\": 1, \"search\": {\"stars\": \"eq\"}}\n";
    let apply = |a: &str| -> Vec<serde_json::Value> {
        let o = tessera_stdin(
            a,
            &[
                "advise",
                "hotels",
                "--workload",
                "-",
                "--apply",
                "--wait-timeout",
                "60",
            ],
            workload,
        );
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let lines = apply(a);
    assert_eq!(
        lines[0]["clusters"][0]["configurations"][0]["subspaces"],
        serde_json::json!([["stars"]])
    );
    let actions: Vec<(String, u64)> = lines[1..]
        .iter()
        .map(|l| {
            (
                l["action"].as_str().unwrap().to_owned(),
                l["subspace"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("add-subspace".to_owned(), 2),
            ("built".to_owned(), 2),
            ("drop-subspace".to_owned(), 1),
            ("applied".to_owned(), 0),
        ]
    );
    assert_eq!(lines[3]["attributes"], serde_json::json!(["city", "price"]));
    let last = lines.last().unwrap();
    assert_eq!((&last["added"], &last["dropped"]), (&1.into(), &1.into()));
    // The added subspace is cut from the 20 hotels' stars: a region per value (0 to 4).
    assert_eq!(
        last["subspaces"],
        serde_json::json!([
            {"id": 0, "attributes": ["id"], "state": "serving", "regions": 16, "cut_by_data": false},
            {"id": 1, "attributes": ["city", "price"], "state": "dropped"},
            {"id": 2, "attributes": ["stars"], "state": "serving", "regions": 5, "cut_by_data": true},
        ])
    );
    assert_eq!(
        searched_keys(a, &["stars=4"]),
        expected_keys(&hotels, |h| h.2 == 4)
    );
    // Applied again: nothing to change.
    let lines = apply(a);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        (&lines[1]["added"], &lines[1]["dropped"]),
        (&0.into(), &0.into())
    );
    // --wait-timeout belongs to --apply.
    let o = tessera_stdin(
        a,
        &["advise", "hotels", "--workload", "-", "--wait-timeout", "5"],
        workload,
    );
    assert_eq!(code(&o), 2);
}

/// `tessera status --json` gives the configuration's encoded size (what every server and
/// client fetches at each epoch): it grows by a replica set per region of a space added, and
/// falls back when the space is removed.
#[test]
fn status_gives_the_configuration_size() {
    let dir = tempfile::tempdir().unwrap();
    let server = DevServer::start(&dir.path().join("data"));
    let a = server.addr.as_str();
    let bytes = |a: &str| {
        status_json(a)["configuration_bytes"]
            .as_u64()
            .expect("configuration_bytes")
    };
    let empty = bytes(a);
    assert!(empty > 0);
    let o = tessera_stdin(
        a,
        &["add-space"],
        "space sized key id attributes string city subspace city create 16 partitions",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let with = bytes(a);
    // 32 regions (16 of the key subspace, 16 of `city`), each a replica set of one server
    // (a length and an id), besides the schema.
    assert!(with >= empty + 32 * 2 + 5, "{with} against {empty}");
    let o = tessera(a, &["rm-space", "sized"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // The same configuration but for its epoch, whose varint may have grown.
    let after = bytes(a);
    assert!(
        (empty..empty + 4).contains(&after),
        "{after} against {empty}"
    );
}

/// What a newcomer trips on (issue "Operating and using Tessera", item 7), each answered with
/// an error that says what is wrong, or made to work.
#[test]
fn what_a_newcomer_trips_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = DevServer::start(&data);
    let a = server.addr.as_str();

    // A misspelt type is named, with the types there are.
    let o = tessera_stdin(a, &["add-space"], "space t key k attributes strng city");
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("unknown type \"strng\""),
        "{}",
        stderr(&o)
    );
    // HyperDex's singular `attribute`.
    let o = tessera_stdin(
        a,
        &["add-space"],
        "space h key id attribute string city, int price subspace city, price",
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // A value of the wrong type names its attribute.
    let o = tessera(a, &["search", "h", "price=cheap"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("attribute \"price\" is an int"),
        "{}",
        stderr(&o)
    );

    // An address without a port says so, instead of suggesting a server is not running.
    let o = tessera("localhost", &["get", "h", "x"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("has no port"), "{}", stderr(&o));

    // A second daemon on the same address, or on the same data directory, says which.
    let o = Command::new(TESSERA)
        .args(["dev", "--listen", a, "--data-dir"])
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains(&format!("cannot listen on {a}")),
        "{}",
        stderr(&o)
    );
    let o = Command::new(TESSERA)
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("in use by another process"),
        "{}",
        stderr(&o)
    );

    // `put` reads its JSON from stdin (`-`) or a file (`@FILE`): objects near the 1 MiB limit
    // do not fit a command line.
    let o = tessera_stdin(
        a,
        &["put", "h", "k1", "-"],
        r#"{"city": "Ithaca", "price": 3}"#,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let big = "x".repeat(900 * 1024);
    let file = dir.path().join("big.json");
    std::fs::write(&file, format!(r#"{{"city": "{big}", "price": 4}}"#)).unwrap();
    let o = tessera(a, &["put", "h", "k2", &format!("@{}", file.display())]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = tessera(a, &["get", "h", "k1"]);
    assert_eq!(
        stdout(&o).trim(),
        r#"{"id":"k1","city":"Ithaca","price":3}"#
    );
    let o = tessera(a, &["count", "h", "price=4"]);
    assert_eq!(stdout(&o).trim(), "1");

    // A reader that goes away (`| head`) ends the command quietly.
    let mut child = Command::new(TESSERA)
        .args(["search", "h"])
        .env("TESSERA_ADDR", a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // The arguments of put and search are described in --help.
    let o = tessera(a, &["put", "--help"]);
    assert!(
        stdout(&o).contains("`-` reads it from stdin"),
        "{}",
        stdout(&o)
    );
    let o = tessera(a, &["search", "--help"]);
    assert!(
        stdout(&o).contains("Predicates that must all hold"),
        "{}",
        stdout(&o)
    );
    // Examples in --help keep their lines (clap joins a paragraph's lines unless told not to).
    for (command, line) in [
        ("add-space", "\n  key id\n"),
        ("certs", "\n  tessera --tls-ca tls/ca.pem status\n"),
        ("coordinator", "\n      --peers 1=127.0.0.1:1982,"),
    ] {
        let o = tessera(a, &[command, "--help"]);
        assert!(stdout(&o).contains(line), "{command}: {}", stdout(&o));
    }
}
