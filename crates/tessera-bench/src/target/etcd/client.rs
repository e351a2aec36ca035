//! The etcd target's client (see the parent module for the layout and what each operation is).

use std::time::Duration;

use etcd_client::{ConnectOptions, GetOptions, KvClient, Txn, TxnOp};

use super::{field_key, record_prefix, OPERATION_TIMEOUT_MS};
use crate::target::{Inexpressible, Target, TargetError};
use crate::workload::{scan_bounds, Record, SCAN_GROUP_SIZE};

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

/// An etcd client's error as a target's: a broken channel or a deadline is an I/O error (the
/// request may or may not have been applied), a status from the server is the server's refusal.
pub fn etcd_error(e: etcd_client::Error) -> TargetError {
    use std::io::{Error, ErrorKind};
    match e {
        etcd_client::Error::IoError(io) => TargetError::Io(io),
        etcd_client::Error::TransportError(t) => {
            TargetError::Io(Error::new(ErrorKind::ConnectionAborted, t))
        }
        etcd_client::Error::GRpcStatus(status) => match status.code() {
            tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => {
                TargetError::Io(Error::new(ErrorKind::ConnectionAborted, status.to_string()))
            }
            tonic::Code::DeadlineExceeded => {
                TargetError::Io(Error::new(ErrorKind::TimedOut, status.to_string()))
            }
            _ => TargetError::Server(format!("etcd: {status}")),
        },
        other => TargetError::Protocol(format!("etcd: {other}")),
    }
}
