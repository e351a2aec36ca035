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

use std::time::Duration;

use etcd_client::{ConnectOptions, GetOptions, KvClient, Txn, TxnOp};

use super::{etcd_error, Inexpressible, Target, TargetError};
use crate::workload::{field_name, scan_bounds, Record, SCAN_GROUP_SIZE, SPACE_NAME};

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

fn field_key(n: u64, field: usize) -> String {
    format!("{}{}", record_prefix(n), field_name(field))
}

/// One task's handle on the shared client.
#[derive(Clone)]
pub struct EtcdTarget {
    kv: KvClient,
}

impl EtcdTarget {
    /// Connects to `addr` (`HOST:PORT`) and reads once, so an unreachable server fails the
    /// benchmark at start instead of turning every operation into an error.
    pub async fn connect(addr: &str) -> Result<EtcdTarget, TargetError> {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_millis(OPERATION_TIMEOUT_MS));
        let client = etcd_client::Client::connect([format!("http://{addr}")], Some(options))
            .await
            .map_err(etcd_error)?;
        let mut kv = client.kv_client();
        kv.get(
            record_prefix(0),
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .map_err(etcd_error)?;
        Ok(EtcdTarget { kv })
    }
}

/// How many distinct records the keys of a range read belong to (each record's keys are
/// adjacent in key order, so a new record starts wherever the prefix changes).
fn records_in(kvs: &[etcd_client::KeyValue]) -> u64 {
    let mut count = 0;
    let mut last: Option<&[u8]> = None;
    for kv in kvs {
        let key = kv.key();
        let prefix = match key.iter().rposition(|&b| b == b'/') {
            Some(slash) => &key[..=slash],
            None => key,
        };
        if last != Some(prefix) {
            count += 1;
            last = Some(prefix);
        }
    }
    count
}

impl Target for EtcdTarget {
    /// Nothing to create: etcd has one flat key space.
    async fn prepare(&mut self) -> Result<(), TargetError> {
        Ok(())
    }

    async fn insert(&mut self, n: u64, record: &Record) -> Result<(), TargetError> {
        let puts: Vec<TxnOp> = record
            .fields
            .iter()
            .enumerate()
            .map(|(i, value)| TxnOp::put(field_key(n, i), value.as_bytes(), None))
            .collect();
        self.kv
            .txn(Txn::new().and_then(puts))
            .await
            .map_err(etcd_error)?;
        Ok(())
    }

    async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
        let found = self
            .kv
            .get(record_prefix(n), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(etcd_error)?;
        Ok(!found.kvs().is_empty())
    }

    async fn update(&mut self, n: u64, field: usize, value: &str) -> Result<(), TargetError> {
        self.kv
            .put(field_key(n, field), value, None)
            .await
            .map_err(etcd_error)?;
        Ok(())
    }

    async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
        let (prefix, lo, hi) = scan_bounds(n, len);
        let base = prefix as u64 * SCAN_GROUP_SIZE;
        let (first, last) = (base + lo as u64, base + hi as u64);
        let keys_max = (last - first + 1) * crate::workload::FIELD_COUNT as u64;
        let found = self
            .kv
            .get(
                record_prefix(first),
                Some(
                    GetOptions::new()
                        .with_range(record_prefix(last + 1))
                        .with_limit(keys_max as i64),
                ),
            )
            .await
            .map_err(etcd_error)?;
        Ok(records_in(found.kvs()))
    }

    /// etcd cannot search on a value: see [`Inexpressible::EtcdSearch`].
    async fn search(&mut self, _n: u64) -> Result<u64, TargetError> {
        Err(Inexpressible::EtcdSearch.into())
    }
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
