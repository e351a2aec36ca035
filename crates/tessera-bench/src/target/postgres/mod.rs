//! `postgres://…`: PostgreSQL driven with the same generators and concurrency as Tessera and
//! Redis (issue 12, item 1), through `tokio-postgres`.
//!
//! Layout: the table `ycsb (key text PRIMARY KEY, field0..field9 text, prefix bigint, suffix
//! bigint)` with a B-tree index on `(prefix, suffix)`, what a PostgreSQL user would make for
//! the benchmark's scans: a scan is `prefix = p AND suffix BETWEEN lo AND hi`
//! (`workload::scan_bounds`, the records every target scans) and workload S's search fixes both.
//! Every operation reads or writes whole rows, as Tessera's do. One connection per driver
//! task, its statements prepared once: PostgreSQL runs one connection's statements one at a
//! time, so concurrency comes from connections, as for Redis. Durable as PostgreSQL is by
//! default (`fsync = on`, `synchronous_commit = on`: a commit is on disk before it is
//! acknowledged); scripts/bench-peers.sh starts it so.

use tokio_postgres::{NoTls, Statement};

mod documents;
mod people;

pub use documents::Documents;
pub use people::People;

use super::{pg_error, Target, TargetError};
use crate::workload::{
    field_name, prefix_suffix, record_key, scan_bounds, Record, FIELD_COUNT, SPACE_NAME,
};

/// One connection and its prepared statements.
pub struct PostgresTarget {
    client: tokio_postgres::Client,
    statements: Statements,
}

struct Statements {
    insert: Statement,
    read: Statement,
    /// `update[i]` sets field `i`.
    update: Vec<Statement>,
    scan: Statement,
    search: Statement,
}

/// The table's columns after `key`, in order.
fn columns() -> Vec<String> {
    (0..FIELD_COUNT)
        .map(|i| field_name(i).to_owned())
        .chain(["prefix".to_owned(), "suffix".to_owned()])
        .collect()
}

impl PostgresTarget {
    /// Connects to `url` (a libpq-style URL) and prepares the statements. The table must
    /// exist for the statements to prepare: it is created here if absent (what `prepare`
    /// would do), so any task may connect first.
    pub async fn connect(url: &str) -> Result<PostgresTarget, TargetError> {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(pg_error)?;
        // The connection object does the I/O; it ends when the client is dropped.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        create_table(&client).await?;
        let columns = columns();
        let placeholders: Vec<String> = (1..=columns.len() + 1).map(|i| format!("${i}")).collect();
        let insert = format!(
            "INSERT INTO {SPACE_NAME} (key, {}) VALUES ({}) ON CONFLICT (key) DO UPDATE SET {}",
            columns.join(", "),
            placeholders.join(", "),
            columns
                .iter()
                .map(|c| format!("{c} = EXCLUDED.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let prepare = |sql: String| {
            let client = &client;
            async move { client.prepare(&sql).await.map_err(pg_error) }
        };
        let mut update = Vec::with_capacity(FIELD_COUNT);
        for i in 0..FIELD_COUNT {
            update.push(
                prepare(format!(
                    "UPDATE {SPACE_NAME} SET {} = $2 WHERE key = $1",
                    field_name(i)
                ))
                .await?,
            );
        }
        let statements = Statements {
            insert: prepare(insert).await?,
            read: prepare(format!("SELECT * FROM {SPACE_NAME} WHERE key = $1")).await?,
            update,
            scan: prepare(format!(
                "SELECT * FROM {SPACE_NAME} WHERE prefix = $1 AND suffix BETWEEN $2 AND $3"
            ))
            .await?,
            search: prepare(format!(
                "SELECT * FROM {SPACE_NAME} WHERE prefix = $1 AND suffix = $2"
            ))
            .await?,
        };
        Ok(PostgresTarget { client, statements })
    }
}

/// Creates the table and its scan index unless they exist; refuses a table of that name
/// without the benchmark's columns (every operation would fail).
async fn create_table(client: &tokio_postgres::Client) -> Result<(), TargetError> {
    let fields: Vec<String> = (0..FIELD_COUNT)
        .map(|i| format!("{} text NOT NULL", field_name(i)))
        .collect();
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {SPACE_NAME} (key text PRIMARY KEY, {}, prefix bigint NOT NULL, suffix bigint NOT NULL);
             CREATE INDEX IF NOT EXISTS {SPACE_NAME}_prefix_suffix ON {SPACE_NAME} (prefix, suffix);",
            fields.join(", ")
        ))
        .await
        .map_err(pg_error)?;
    let rows = client
        .query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = $1",
            &[&SPACE_NAME],
        )
        .await
        .map_err(pg_error)?;
    let have: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    for column in columns() {
        if !have.contains(&column) {
            return Err(TargetError::Server(format!(
                "table {SPACE_NAME:?} exists without column {column:?}: drop it (DROP TABLE {SPACE_NAME}) and load again"
            )));
        }
    }
    Ok(())
}

impl Target for PostgresTarget {
    /// The table was made when the target connected.
    async fn prepare(&mut self) -> Result<(), TargetError> {
        Ok(())
    }

    async fn insert(&mut self, n: u64, record: &Record) -> Result<(), TargetError> {
        let key = record_key(n);
        let (prefix, suffix) = prefix_suffix(n);
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&key];
        for f in &record.fields {
            params.push(f);
        }
        params.push(&prefix);
        params.push(&suffix);
        self.client
            .execute(&self.statements.insert, &params)
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
        let rows = self
            .client
            .query(&self.statements.read, &[&record_key(n)])
            .await
            .map_err(pg_error)?;
        Ok(!rows.is_empty())
    }

    async fn update(&mut self, n: u64, field: usize, value: &str) -> Result<(), TargetError> {
        self.client
            .execute(&self.statements.update[field], &[&record_key(n), &value])
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
        let (prefix, lo, hi) = scan_bounds(n, len);
        let rows = self
            .client
            .query(&self.statements.scan, &[&prefix, &lo, &hi])
            .await
            .map_err(pg_error)?;
        Ok(rows.len() as u64)
    }

    async fn search(&mut self, n: u64) -> Result<u64, TargetError> {
        let (prefix, suffix) = prefix_suffix(n);
        let rows = self
            .client
            .query(&self.statements.search, &[&prefix, &suffix])
            .await
            .map_err(pg_error)?;
        Ok(rows.len() as u64)
    }
}
