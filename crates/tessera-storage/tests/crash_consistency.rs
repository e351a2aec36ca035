//! `kill -9` in the middle of a stream of commits loses no acknowledged write.
//!
//! The test re-executes its own binary as a child (selected by an environment variable) that
//! commits numbered writes with `FsyncPolicy::Always` and prints `ack N` after each `commit`
//! returns. The parent SIGKILLs it mid-stream, reopens the store and checks every acknowledged
//! write, and that the moving object `mover` has exactly one entry per subspace.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{all_regions, people, person, put};
use tessera_storage::{FsyncPolicy, Store, StoreOptions};
use tessera_types::{SubspaceId, Value};

const CHILD_DIR: &str = "TESSERA_STORAGE_CRASH_CHILD_DIR";
const ACKS_BEFORE_KILL: u64 = 150;

/// The child's body: runs only when re-executed by `acknowledged_writes_survive_sigkill`.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let store = Store::open(
        dir.as_ref(),
        StoreOptions {
            fsync: FsyncPolicy::Always,
            ..Default::default()
        },
    )
    .unwrap();
    store.create_space(&people("people", 8)).unwrap();
    let mut mover = None;
    for n in 1u64.. {
        let moved = person("mover", n as i64, -(n as i64), &format!("s{n}"));
        store
            .commit(&[
                put(
                    "people",
                    None,
                    n,
                    person(&format!("k{n}"), n as i64, 0, "x"),
                ),
                put("people", mover.replace(moved.clone()), n, moved),
            ])
            .unwrap();
        println!("ack {n}");
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = 0u64;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if let Some(n) = line.unwrap().strip_prefix("ack ") {
            acked = n.parse().unwrap();
            if acked >= ACKS_BEFORE_KILL {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
    }
    child.wait().unwrap();
    assert!(
        acked >= ACKS_BEFORE_KILL,
        "the child acknowledged {acked} writes before it was killed"
    );

    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let schema = people("people", 8);
    assert_eq!(store.spaces(), vec![schema.clone()]);
    for n in 1..=acked {
        let got = store
            .get("people", &Value::from(format!("k{n}").as_str()))
            .unwrap();
        assert_eq!(
            got.map(|g| g.object),
            Some(person(&format!("k{n}"), n as i64, 0, "x")),
            "acknowledged write {n}"
        );
    }
    let mover = store.get("people", &Value::from("mover")).unwrap().unwrap();
    assert!(
        mover.version.0 >= acked,
        "mover at version {} after {acked} acknowledged moves",
        mover.version
    );
    // Batches are atomic: the mover's version is that of the last key written with it.
    assert!(store
        .get(
            "people",
            &Value::from(format!("k{}", mover.version.0).as_str())
        )
        .unwrap()
        .is_some());
    assert!(store
        .get(
            "people",
            &Value::from(format!("k{}", mover.version.0 + 1).as_str())
        )
        .unwrap()
        .is_none());
    for (subspace, d) in [(1usize, 2usize), (2, 1)] {
        let found: Vec<_> = store
            .search(
                "people",
                SubspaceId(subspace as u16),
                &all_regions(&schema, subspace),
                &vec![0; d],
                &vec![u64::MAX; d],
            )
            .unwrap()
            .map(Result::unwrap)
            .filter(|o| o.object.key() == &Value::from("mover"))
            .collect();
        assert_eq!(found.len(), 1, "mover has one entry in subspace {subspace}");
        assert_eq!(found[0], mover);
    }
}
