//! The log of pending updates (`ObjectWrite::Log`): a record changes nothing readable; a
//! commit retires it; reopening the store commits the records it finds, in version order,
//! once, and ignores those of spaces that are gone. The expected objects are written out by
//! hand (a model of what each step leaves), not read back from the implementation.

mod common;

use common::{people, person, put};
use tessera_storage::{FsyncPolicy, ObjectWrite, Store, StoreOptions, StoredObject};
use tessera_types::{Object, SubspaceId, Value, Version};

fn open(dir: &std::path::Path) -> Store {
    let options = StoreOptions {
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    Store::open(dir, options).unwrap()
}

fn stored(version: u64, object: Object) -> StoredObject {
    StoredObject {
        version: Version(version),
        object,
    }
}

/// The record of a commit in the key subspace that replaces `old` with `new` at `version`.
fn log(id: u64, old: Option<Object>, version: u64, new: Option<Object>) -> ObjectWrite {
    ObjectWrite::Log {
        id,
        version: Version(version),
        space: "people".into(),
        subspace: SubspaceId::KEY,
        remove: old,
        insert: new.map(|n| stored(version, n)),
    }
}

fn entry(old: Option<Object>, version: u64, new: Option<Object>) -> ObjectWrite {
    ObjectWrite::Entry {
        space: "people".into(),
        subspace: SubspaceId::KEY,
        remove: old,
        insert: new.map(|n| stored(version, n)),
    }
}

fn get(store: &Store, key: &str) -> Option<StoredObject> {
    store.get("people", &Value::from(key)).unwrap()
}

#[test]
fn a_record_changes_nothing_until_the_store_reopens_then_commits_once() {
    let dir = tempfile::tempdir().unwrap();
    let (v1, v2, v3) = (
        person("k", 1, 1, "one"),
        person("k", 2, 2, "two"),
        person("k", 3, 3, "three"),
    );
    {
        let store = open(dir.path());
        store.create_space(&people("people", 4)).unwrap();
        store.commit(&[put("people", None, 1, v1.clone())]).unwrap();
        store
            .commit(&[
                log(7, Some(v1.clone()), 2, Some(v2.clone())),
                log(3, Some(v2.clone()), 3, Some(v3.clone())),
            ])
            .unwrap();
        assert_eq!(get(&store, "k"), Some(stored(1, v1.clone())));
    }
    // Both records, in version order (ids are not in that order): v3 remains.
    {
        let store = open(dir.path());
        assert_eq!(get(&store, "k"), Some(stored(3, v3.clone())));
        // A record found was removed: a later commit is not undone by a second recovery.
        store
            .commit(&[entry(Some(v3.clone()), 4, Some(v1.clone()))])
            .unwrap();
    }
    let store = open(dir.path());
    assert_eq!(get(&store, "k"), Some(stored(4, v1)));
}

#[test]
fn a_commit_that_retires_its_record_is_not_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let (v1, v2, v3) = (
        person("k", 1, 1, "one"),
        person("k", 2, 2, "two"),
        person("k", 3, 3, "three"),
    );
    {
        let store = open(dir.path());
        store.create_space(&people("people", 4)).unwrap();
        store.commit(&[log(0, None, 1, Some(v1.clone()))]).unwrap();
        // Committed without an fsync: the record made it durable already.
        store
            .commit_buffered(&[
                entry(None, 1, Some(v1.clone())),
                ObjectWrite::Unlog { id: 0 },
            ])
            .unwrap();
        assert_eq!(get(&store, "k"), Some(stored(1, v1.clone())));
        store
            .commit(&[log(1, Some(v1.clone()), 2, Some(v2.clone()))])
            .unwrap();
        store
            .commit_buffered(&[
                entry(Some(v1.clone()), 2, Some(v2.clone())),
                ObjectWrite::Unlog { id: 1 },
            ])
            .unwrap();
        store
            .commit(&[entry(Some(v2.clone()), 3, Some(v3.clone()))])
            .unwrap();
    }
    let store = open(dir.path());
    assert_eq!(get(&store, "k"), Some(stored(3, v3)));
}

#[test]
fn a_delete_in_the_log_deletes_and_records_of_a_dropped_space_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (person("a", 1, 1, "a"), person("b", 2, 2, "b"));
    {
        let store = open(dir.path());
        store.create_space(&people("people", 4)).unwrap();
        store.create_space(&people("gone", 4)).unwrap();
        store
            .commit(&[
                put("people", None, 1, a.clone()),
                put("gone", None, 1, b.clone()),
            ])
            .unwrap();
        let record = ObjectWrite::Log {
            id: 1,
            version: Version(2),
            space: "gone".into(),
            subspace: SubspaceId::KEY,
            remove: Some(b.clone()),
            insert: None,
        };
        store
            .commit(&[log(0, Some(a.clone()), 2, None), record])
            .unwrap();
        store.drop_space("gone").unwrap();
    }
    let store = open(dir.path());
    assert_eq!(get(&store, "a"), None);
    store.create_space(&people("gone", 4)).unwrap();
    assert_eq!(store.get("gone", &Value::from("b")).unwrap(), None);
}

#[test]
fn a_record_that_does_not_fit_its_space_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_space(&people("people", 4)).unwrap();
    let wrong = Object {
        values: vec![Value::Int(1)],
    };
    let batch = [
        put("people", None, 1, person("k", 1, 1, "x")),
        log(0, None, 2, Some(wrong)),
    ];
    assert!(store.commit(&batch).is_err());
    assert_eq!(get(&store, "k"), None);
    drop(store);
    let store = open(dir.path());
    assert_eq!(get(&store, "k"), None);
}
