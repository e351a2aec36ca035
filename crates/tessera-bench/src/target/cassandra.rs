//! `cql://HOST:PORT`: Apache Cassandra (5.0) through the `scylla` CQL driver, driven with the
//! same generators and concurrency as the other targets (issue 12, items 1 and 2): YCSB a–f and
//! s ([`CqlTarget`]), and the searches on secondary attributes ([`People`], workload secondary).
//!
//! Keyspace [`KEYSPACE`], `SimpleStrategy` with one replica (one node). Every statement is
//! prepared once and runs at consistency `ONE`, which on one node is every replica. Every task
//! shares one session: the driver multiplexes their requests over its connection, and
//! Cassandra serves one connection's requests concurrently. Durable as the server is started:
//! scripts/cassandra.sh sets `commitlog_sync: batch`, so a write is acknowledged only after the
//! commit log holding it is fsynced.
//!
//! YCSB layout: table [`TABLE`] `(key text PRIMARY KEY, field0..field9 text, prefix bigint,
//! suffix bigint)` with storage-attached indexes (SAI) on `prefix` and on `suffix`. A read reads
//! the whole row by key; an update sets one field; read-modify-write is the read, then the
//! update (not atomic, as YCSB's F does not ask for it).
//!
//! Why YCSB E runs here, and how. A table partitioned by `key` keeps its rows in token (hash)
//! order, so the scan of YCSB's own Cassandra binding, `token(key) >= token(?) LIMIT n`, reads
//! n rows that follow the start key's *hash*, not the records after it: another query, with
//! other results. A clustering key would order them, but only within one partition, and would
//! turn every key read into a read inside a 1 000-row partition. The scan is instead what it is
//! for PostgreSQL and Tessera: a search on the scan attributes, `prefix = p AND suffix >= lo AND
//! suffix <= hi` (`workload::scan_bounds`), which the two SAI indexes answer (intersected by
//! Cassandra). It returns exactly the records every other target scans, and the agreement check
//! before a timed run of e proves that it does. Workload s's search fixes both attributes the
//! same way. The indexes cost the load what PostgreSQL's `(prefix, suffix)` index costs it;
//! updates of a field do not touch them.
//!
//! Secondary layout ([`People`]): table `people (key text PRIMARY KEY, city text, age bigint,
//! score bigint, name text)` with SAI indexes on `city`, `age` and `score`; the queries are
//! `city = ?`, `city = ? AND age = ?` and `score >= ? AND score <= ?`, every match read whole.

use std::sync::Arc;
use std::time::Duration;

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::serialize::row::SerializeRow;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;

use super::{cql_error, Target, TargetError};
use crate::secondary::{Person, Query};
use crate::workload::{field_name, prefix_suffix, record_key, scan_bounds, Record, FIELD_COUNT};

/// Cassandra's native protocol port.
pub const DEFAULT_PORT: u16 = 9042;
/// The keyspace of every table the benchmark makes.
pub const KEYSPACE: &str = "tessera_bench";
/// The YCSB table (the name YCSB's own Cassandra binding uses).
pub const TABLE: &str = "usertable";
/// How long one request may wait for its answer before it counts as an error.
pub const OPERATION_TIMEOUT_MS: u64 = 30_000;

// The insert binds a tuple of the key, ten fields and the two scan attributes.
const _: () = assert!(FIELD_COUNT == 10);

/// Parses `cql://HOST[:PORT]` into `HOST:PORT` (port 9042 when absent).
pub fn parse_url(url: &str) -> Result<String, String> {
    super::parse_host_port(url, "cql", DEFAULT_PORT)
}

/// Opens a session to the node at `addr` (`HOST:PORT`), every statement at consistency `ONE`,
/// and makes the keyspace unless it exists.
pub async fn connect(addr: &str) -> Result<Arc<Session>, TargetError> {
    let profile = ExecutionProfile::builder()
        .consistency(Consistency::One)
        .request_timeout(Some(Duration::from_millis(OPERATION_TIMEOUT_MS)))
        .build();
    let session = SessionBuilder::new()
        .known_node(addr)
        .connection_timeout(Duration::from_secs(5))
        .default_execution_profile_handle(profile.into_handle())
        .build()
        .await
        .map_err(|e| {
            TargetError::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                e,
            ))
        })?;
    ddl(
        &session,
        &format!(
            "CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ),
    )
    .await?;
    Ok(Arc::new(session))
}

/// Runs one schema statement (the driver waits for the schema to agree before it returns).
async fn ddl(session: &Session, cql: &str) -> Result<(), TargetError> {
    session
        .query_unpaged(cql, ())
        .await
        .map(|_| ())
        .map_err(cql_error)
}

/// Makes `table` with `columns` and an SAI index on each of `indexed` unless they exist, and
/// refuses a table of that name that lacks a column (every statement would fail).
async fn create_table(
    session: &Session,
    table: &str,
    columns: &[(&str, &str)],
    indexed: &[&str],
) -> Result<(), TargetError> {
    let definition: Vec<String> = columns.iter().map(|(c, t)| format!("{c} {t}")).collect();
    ddl(
        session,
        &format!(
            "CREATE TABLE IF NOT EXISTS {KEYSPACE}.{table} (key text PRIMARY KEY, {})",
            definition.join(", ")
        ),
    )
    .await?;
    let have = session
        .query_unpaged(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (KEYSPACE, table),
        )
        .await
        .map_err(cql_error)?
        .into_rows_result()
        .map_err(|e| TargetError::Protocol(format!("system_schema.columns: {e}")))?;
    let have: Vec<String> = have
        .rows::<(String,)>()
        .map_err(|e| TargetError::Protocol(format!("system_schema.columns: {e}")))?
        .map(|row| row.map(|(name,)| name))
        .collect::<Result<_, _>>()
        .map_err(|e| TargetError::Protocol(format!("system_schema.columns: {e}")))?;
    for (column, _) in columns {
        if !have.iter().any(|c| c == column) {
            return Err(TargetError::Server(format!(
                "table {KEYSPACE}.{table} exists without column {column:?}: drop it (DROP TABLE {KEYSPACE}.{table}) and load again"
            )));
        }
    }
    for column in indexed {
        ddl(
            session,
            &format!(
                "CREATE CUSTOM INDEX IF NOT EXISTS {table}_{column} ON {KEYSPACE}.{table} ({column}) USING 'StorageAttachedIndex'"
            ),
        )
        .await?;
    }
    Ok(())
}

async fn prepare(session: &Session, cql: String) -> Result<PreparedStatement, TargetError> {
    session
        .prepare(cql)
        .await
        .map_err(|e| TargetError::Server(format!("cassandra: cannot prepare a statement: {e}")))
}

/// How many rows `statement` returns for `values`, page after page (each row read whole).
async fn count_rows(
    session: &Session,
    statement: &PreparedStatement,
    values: &impl SerializeRow,
) -> Result<u64, TargetError> {
    let mut rows = 0;
    let mut paging = PagingState::start();
    loop {
        let (result, next) = session
            .execute_single_page(statement, values, paging)
            .await
            .map_err(cql_error)?;
        rows += result
            .into_rows_result()
            .map_err(|e| TargetError::Protocol(format!("cql: {e}")))?
            .rows_num() as u64;
        match next {
            PagingStateResponse::HasMorePages { state } => paging = state,
            PagingStateResponse::NoMorePages => return Ok(rows),
        }
    }
}

/// The YCSB statements, shared by every task.
struct Statements {
    insert: PreparedStatement,
    read: PreparedStatement,
    /// `update[i]` sets field `i`.
    update: Vec<PreparedStatement>,
    scan: PreparedStatement,
    search: PreparedStatement,
}

/// One task's handle on the shared session and statements.
#[derive(Clone)]
pub struct CqlTarget {
    session: Arc<Session>,
    statements: Arc<Statements>,
}

impl CqlTarget {
    /// Makes the table and its indexes unless they exist and prepares the statements (the
    /// table must exist for them to prepare, so this is done here rather than in `prepare`).
    pub async fn connect(session: Arc<Session>) -> Result<CqlTarget, TargetError> {
        let mut columns: Vec<(&str, &str)> =
            (0..FIELD_COUNT).map(|i| (field_name(i), "text")).collect();
        columns.extend([("prefix", "bigint"), ("suffix", "bigint")]);
        create_table(&session, TABLE, &columns, &["prefix", "suffix"]).await?;
        let names: Vec<&str> = columns.iter().map(|(c, _)| *c).collect();
        let marks = vec!["?"; names.len() + 1].join(", ");
        let insert = format!(
            "INSERT INTO {KEYSPACE}.{TABLE} (key, {}) VALUES ({marks})",
            names.join(", ")
        );
        let mut update = Vec::with_capacity(FIELD_COUNT);
        for i in 0..FIELD_COUNT {
            update.push(
                prepare(
                    &session,
                    format!(
                        "UPDATE {KEYSPACE}.{TABLE} SET {} = ? WHERE key = ?",
                        field_name(i)
                    ),
                )
                .await?,
            );
        }
        let statements = Statements {
            insert: prepare(&session, insert).await?,
            read: prepare(
                &session,
                format!("SELECT * FROM {KEYSPACE}.{TABLE} WHERE key = ?"),
            )
            .await?,
            update,
            scan: prepare(
                &session,
                format!(
                    "SELECT * FROM {KEYSPACE}.{TABLE} WHERE prefix = ? AND suffix >= ? AND suffix <= ?"
                ),
            )
            .await?,
            search: prepare(
                &session,
                format!("SELECT * FROM {KEYSPACE}.{TABLE} WHERE prefix = ? AND suffix = ?"),
            )
            .await?,
        };
        Ok(CqlTarget {
            session,
            statements: Arc::new(statements),
        })
    }
}

impl Target for CqlTarget {
    /// The table was made when the target connected.
    async fn prepare(&mut self) -> Result<(), TargetError> {
        Ok(())
    }

    async fn insert(&mut self, n: u64, record: &Record) -> Result<(), TargetError> {
        let key = record_key(n);
        let (prefix, suffix) = prefix_suffix(n);
        let f = &record.fields;
        let values = (
            key.as_str(),
            f[0].as_str(),
            f[1].as_str(),
            f[2].as_str(),
            f[3].as_str(),
            f[4].as_str(),
            f[5].as_str(),
            f[6].as_str(),
            f[7].as_str(),
            f[8].as_str(),
            f[9].as_str(),
            prefix,
            suffix,
        );
        self.session
            .execute_unpaged(&self.statements.insert, values)
            .await
            .map_err(cql_error)?;
        Ok(())
    }

    async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
        let key = record_key(n);
        let found = count_rows(&self.session, &self.statements.read, &(key.as_str(),)).await?;
        Ok(found > 0)
    }

    async fn update(&mut self, n: u64, field: usize, value: &str) -> Result<(), TargetError> {
        let key = record_key(n);
        self.session
            .execute_unpaged(&self.statements.update[field], (value, key.as_str()))
            .await
            .map_err(cql_error)?;
        Ok(())
    }

    async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
        let (prefix, lo, hi) = scan_bounds(n, len);
        count_rows(&self.session, &self.statements.scan, &(prefix, lo, hi)).await
    }

    async fn search(&mut self, n: u64) -> Result<u64, TargetError> {
        count_rows(&self.session, &self.statements.search, &prefix_suffix(n)).await
    }
}

/// The `people` table of workload secondary and its statements, shared by every task.
pub struct People {
    session: Arc<Session>,
    insert: PreparedStatement,
    eq1: PreparedStatement,
    eq2: PreparedStatement,
    range: PreparedStatement,
}

impl People {
    /// Makes the table and its SAI indexes unless they exist, and prepares the statements.
    pub async fn connect(session: Arc<Session>) -> Result<People, TargetError> {
        let name = crate::secondary::NAME;
        create_table(
            &session,
            name,
            &[
                ("city", "text"),
                ("age", "bigint"),
                ("score", "bigint"),
                ("name", "text"),
            ],
            &["city", "age", "score"],
        )
        .await?;
        let table = format!("{KEYSPACE}.{name}");
        Ok(People {
            insert: prepare(
                &session,
                format!("INSERT INTO {table} (key, city, age, score, name) VALUES (?, ?, ?, ?, ?)"),
            )
            .await?,
            eq1: prepare(&session, format!("SELECT * FROM {table} WHERE city = ?")).await?,
            eq2: prepare(
                &session,
                format!("SELECT * FROM {table} WHERE city = ? AND age = ?"),
            )
            .await?,
            range: prepare(
                &session,
                format!("SELECT * FROM {table} WHERE score >= ? AND score <= ?"),
            )
            .await?,
            session,
        })
    }

    pub async fn insert(&self, p: &Person) -> Result<(), TargetError> {
        self.session
            .execute_unpaged(
                &self.insert,
                (
                    p.key.as_str(),
                    p.city.as_str(),
                    p.age,
                    p.score,
                    p.name.as_str(),
                ),
            )
            .await
            .map(|_| ())
            .map_err(cql_error)
    }

    /// Runs `q`, reading every matching row whole; returns how many matched.
    pub async fn query(&self, q: &Query) -> Result<u64, TargetError> {
        match q {
            Query::Eq1 { city } => count_rows(&self.session, &self.eq1, &(city.as_str(),)).await,
            Query::Eq2 { city, age } => {
                count_rows(&self.session, &self.eq2, &(city.as_str(), *age)).await
            }
            Query::Range { lo, hi } => count_rows(&self.session, &self.range, &(*lo, *hi)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cql_urls() {
        assert_eq!(
            parse_url("cql://127.0.0.1:9142"),
            Ok("127.0.0.1:9142".into())
        );
        assert_eq!(parse_url("cql://localhost"), Ok("localhost:9042".into()));
        assert!(parse_url("cql://h:99999").is_err());
        assert!(parse_url("cql://h:1/ks").is_err());
        assert!(parse_url("cassandra://h:1").is_err());
    }
}
