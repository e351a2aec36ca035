//! The systems a benchmark drives, behind one trait so the same generator, concurrency and
//! measurement code runs against each: that is what makes Tessera/Redis ratios meaningful.
//!
//! A driver task owns one `Target` value for its whole life. What a value holds is up to the
//! target: Redis gets one connection per task, Tessera a clone of one shared pipelined client.

use std::future::Future;

use crate::workload::Record;

pub mod memory;
pub mod postgres;
pub mod redis;
pub mod tessera;

/// Why one operation failed. The driver counts it as an error of that operation type and goes
/// on; a broken connection is re-established by the target on its next operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The connection failed or closed; the operation may or may not have been applied.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent something the target cannot interpret.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The server refused the operation.
    #[error("server: {0}")]
    Server(String),
    /// The target cannot perform this operation (not yet wired, or not supported).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// A Tessera client's error as a target's.
pub fn client_error(e: tessera_client::ClientError) -> TargetError {
    use tessera_client::ClientError;
    match e {
        ClientError::Io(io) => TargetError::Io(io),
        ClientError::ConnectionClosed => {
            TargetError::Io(std::io::ErrorKind::ConnectionAborted.into())
        }
        ClientError::Protocol(p) => TargetError::Protocol(p),
        other => TargetError::Server(other.to_string()),
    }
}

/// A PostgreSQL driver's error as a target's: a closed connection is an I/O error.
pub fn pg_error(e: tokio_postgres::Error) -> TargetError {
    if e.is_closed() {
        TargetError::Io(std::io::ErrorKind::ConnectionAborted.into())
    } else {
        TargetError::Server(format!("postgres: {e}"))
    }
}

/// The operations of the YCSB core workloads, keyed by record number `n` (see
/// `workload::record_key`, `workload::prefix_suffix`).
///
/// Methods return `impl Future + Send` rather than being `async fn` so that the driver can
/// `tokio::spawn` tasks generic over any target.
pub trait Target: Send + 'static {
    /// Prepares the target before a load (Tessera: create the `ycsb` space if absent).
    fn prepare(&mut self) -> impl Future<Output = Result<(), TargetError>> + Send;

    /// Stores record `n` with all its fields and its scan attributes.
    fn insert(
        &mut self,
        n: u64,
        record: &Record,
    ) -> impl Future<Output = Result<(), TargetError>> + Send;

    /// Reads every field of record `n`; `Ok(false)` when it does not exist.
    fn read(&mut self, n: u64) -> impl Future<Output = Result<bool, TargetError>> + Send;

    /// Overwrites one field of record `n` (YCSB's default `writeallfields=false`).
    fn update(
        &mut self,
        n: u64,
        field: usize,
        value: &str,
    ) -> impl Future<Output = Result<(), TargetError>> + Send;

    /// Reads up to `len` records from `n` on, within `n`'s prefix group (`workload::scan_bounds`);
    /// returns how many were found.
    fn scan(&mut self, n: u64, len: u64) -> impl Future<Output = Result<u64, TargetError>> + Send;

    /// Searches for record `n` by fixing both dimensions of the `prefix, suffix` subspace
    /// (`prefix == n/1000 && suffix == n%1000`, workload S) and reads every record found;
    /// returns how many were found (1 when `n` exists, as the scan attributes are unique).
    /// Targets without searches answer `Unsupported`.
    fn search(&mut self, n: u64) -> impl Future<Output = Result<u64, TargetError>> + Send {
        let _ = n;
        async {
            Err(TargetError::Unsupported(
                "search-read (workload s) is not supported by this target".into(),
            ))
        }
    }

    /// A read of record `n` followed by an update of one field, as YCSB's workload F does (not
    /// atomic: YCSB's core workload does not ask for it). `Ok(false)` when the read found nothing;
    /// the update is then skipped.
    fn read_modify_write(
        &mut self,
        n: u64,
        field: usize,
        value: &str,
    ) -> impl Future<Output = Result<bool, TargetError>> + Send {
        async move {
            if !self.read(n).await? {
                return Ok(false);
            }
            self.update(n, field, value).await?;
            Ok(true)
        }
    }
}
