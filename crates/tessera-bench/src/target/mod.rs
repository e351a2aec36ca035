//! The systems a benchmark drives, behind one trait so the same generator, concurrency and
//! measurement code runs against each: that is what makes Tessera/Redis ratios meaningful.
//!
//! A driver task owns one `Target` value for its whole life. What a value holds is up to the
//! target: Redis gets one connection per task, Tessera a clone of one shared pipelined client.

use std::future::Future;

use crate::workload::Record;

// The peer stores' clients exist with feature `peers` only; etcd's URL parsing and key layout
// (pure) are there without it.
#[cfg(feature = "peers")]
pub mod cassandra;
pub mod etcd;
pub mod memory;
#[cfg(feature = "peers")]
pub mod postgres;
#[cfg(feature = "peers")]
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
    /// The target's system has no way to express this operation faithfully.
    #[error(transparent)]
    Inexpressible(#[from] Inexpressible),
}

/// Why a system cannot run a workload: what the system lacks, not what this crate has not
/// written. A benchmark refuses such a workload before it connects rather than run something
/// else under its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Inexpressible {
    /// etcd finds keys by key (one, or a range in byte order) and nothing else: a search on a
    /// value (workloads s, secondary, documents, dblp) would be a scan of every key.
    #[error(
        "etcd has no search on values (no secondary index): it reads keys by key or key range only"
    )]
    EtcdSearch,
    /// Cassandra stores typed rows; it has no JSON document whose paths it could index, which
    /// the documents and dblp workloads search by.
    #[error("Cassandra has no documents to search by path: its rows are typed columns")]
    CqlDocuments,
}

/// Parses `SCHEME://HOST[:PORT][/]` into `HOST:PORT`, with `default_port` when the URL has
/// none. Paths, credentials and query strings are refused: every target drives a local server
/// on a plain connection. IPv6 literals are written in brackets (`[::1]:2379`).
pub fn parse_host_port(url: &str, scheme: &str, default_port: u16) -> Result<String, String> {
    let rest = url
        .strip_prefix(scheme)
        .and_then(|r| r.strip_prefix("://"))
        .ok_or_else(|| format!("{url:?} does not start with {scheme}://"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains(['/', '@', '?']) {
        return Err(format!("{url:?}: expected {scheme}://HOST:PORT"));
    }
    let has_port = match rest.rsplit_once(':') {
        // An IPv6 literal "[::1]" has colons but no port after the bracket.
        Some((host, port)) if !host.is_empty() && !port.contains(']') => {
            port.parse::<u16>()
                .map_err(|_| format!("{url:?}: bad port {port:?}"))?;
            true
        }
        _ => false,
    };
    Ok(if has_port {
        rest.to_owned()
    } else {
        format!("{rest}:{default_port}")
    })
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

#[cfg(feature = "peers")]
/// A PostgreSQL driver's error as a target's: a closed connection is an I/O error.
pub fn pg_error(e: tokio_postgres::Error) -> TargetError {
    if e.is_closed() {
        TargetError::Io(std::io::ErrorKind::ConnectionAborted.into())
    } else {
        TargetError::Server(format!("postgres: {e}"))
    }
}

#[cfg(feature = "peers")]
/// A CQL driver's error as a target's: one that never reached a node or lost its connection
/// is an I/O error; what a node answered with is the server's.
pub fn cql_error(e: scylla::errors::ExecutionError) -> TargetError {
    use scylla::errors::{ExecutionError, RequestAttemptError};
    use std::io::{Error, ErrorKind};
    match e {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, message)) => {
            TargetError::Server(format!("cassandra: {db}: {message}"))
        }
        ExecutionError::RequestTimeout(after) => TargetError::Io(Error::new(
            ErrorKind::TimedOut,
            format!("no answer within {after:?}"),
        )),
        ExecutionError::ConnectionPoolError(_)
        | ExecutionError::EmptyPlan
        | ExecutionError::LastAttemptError(RequestAttemptError::BrokenConnectionError(_)) => {
            TargetError::Io(Error::new(ErrorKind::ConnectionAborted, e.to_string()))
        }
        other => TargetError::Protocol(format!("cql: {other}")),
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
