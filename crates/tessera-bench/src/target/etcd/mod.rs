//! `etcd://HOST:PORT`: etcd v3 through `etcd-client` (gRPC), driven with the same generators
//! and concurrency as the other targets (issue 12, item 1). Key operations only: etcd finds
//! keys by key or by key range and has no search on values, so workloads s and secondary are
//! refused ([`Inexpressible::EtcdSearch`]).
//!
//! Layout: one etcd key per field, `ycsb/user{n:020}/field{i}` (the record number zero-padded
//! so that etcd's byte order of keys is the records' order). This is how an etcd application
//! keeps a record whose fields change one at a time, and what makes each operation one request:
//! * insert: one transaction of the ten puts (atomic, one Raft entry, one WAL fsync);
//! * read: one range read of the record's prefix, which returns its ten fields;
//! * update: one put of the field's key, as Redis's `HSET` and SQL's `UPDATE` write one field;
//! * read-modify-write: the read, then the update (not atomic, as YCSB's F does not ask for it);
//! * scan (YCSB E): one range read from the first record's prefix up to the prefix of the
//!   record after the last one `workload::scan_bounds` gives (the same records every target
//!   scans), with a limit of ten keys a record: YCSB E's "from a key, in key order, at most
//!   `len`", which etcd's range with a limit is.
//!
//! Reads are linearizable (etcd's default: the member confirms with the leader before it
//! answers), as Tessera's are. Every task holds a clone of one client: gRPC multiplexes their
//! requests over one HTTP/2 connection, as Tessera's client pipelines over one. Durable as
//! etcd is by default: a write is acknowledged after its WAL entry is fsynced.

use crate::workload::{field_name, SPACE_NAME};

/// The client itself, with feature `peers` only (its build needs `protoc`).
#[cfg(feature = "peers")]
mod client;
#[cfg(feature = "peers")]
pub use client::{etcd_error, EtcdTarget};

/// etcd's client port.
pub const DEFAULT_PORT: u16 = 2379;

/// How long one request may wait for its answer before it counts as an error. Generous: it
/// exists so a hung server shows up as errors instead of a hung benchmark.
pub const OPERATION_TIMEOUT_MS: u64 = 30_000;

/// Parses `etcd://HOST[:PORT]` into `HOST:PORT` (port 2379 when absent).
pub fn parse_url(url: &str) -> Result<String, String> {
    super::parse_host_port(url, "etcd", DEFAULT_PORT)
}

/// The prefix of every key of record `n`: its fields' keys are this and the field's name.
pub fn record_prefix(n: u64) -> String {
    format!("{SPACE_NAME}/user{n:020}/")
}

/// The key of field `field` of record `n`.
pub fn field_key(n: u64, field: usize) -> String {
    format!("{}{}", record_prefix(n), field_name(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_etcd_urls() {
        assert_eq!(
            parse_url("etcd://127.0.0.1:2380"),
            Ok("127.0.0.1:2380".into())
        );
        assert_eq!(parse_url("etcd://localhost"), Ok("localhost:2379".into()));
        assert_eq!(parse_url("etcd://[::1]:7000/"), Ok("[::1]:7000".into()));
        assert!(parse_url("etcd://h:notaport").is_err());
        assert!(parse_url("etcd://u@h:1").is_err());
        assert!(parse_url("etcds://h:1").is_err());
        assert!(parse_url("etcd://").is_err());
    }

    /// Keys sort as records do, across digit counts and prefix groups, and a scan's end key
    /// (the next record's prefix) is past every field of the last record scanned.
    #[test]
    fn keys_sort_in_record_order() {
        let mut keys: Vec<String> = [9, 10, 99, 100, 999, 1000, 12_345, u64::MAX]
            .iter()
            .flat_map(|&n| (0..crate::workload::FIELD_COUNT).map(move |i| field_key(n, i)))
            .collect();
        let sorted = {
            let mut k = keys.clone();
            k.sort();
            k
        };
        assert_eq!(keys, sorted);
        keys.retain(|k| k.starts_with(&record_prefix(99)));
        assert_eq!(keys.len(), crate::workload::FIELD_COUNT);
        assert!(keys
            .iter()
            .all(|k| k.as_str() < record_prefix(100).as_str()));
    }
}
