//! The documents and dblp workloads' table in PostgreSQL: `key text PRIMARY KEY, doc jsonb`,
//! a GIN index on `doc` (and a B-tree on `doc->'year'` for the bibliography), what a
//! PostgreSQL user would make to search JSON documents.

use std::collections::HashMap;

use tokio::sync::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Statement};

use crate::bibliography::{Cond, Entry, Query};
use crate::docsys::{to_json, to_json_doc, Dataset};
use crate::target::{pg_error, TargetError};

/// One connection and its prepared statements (by SQL text), for one task.
pub struct Documents {
    connection: Mutex<Connection>,
    dataset: Dataset,
}

struct Connection {
    client: tokio_postgres::Client,
    statements: HashMap<String, Statement>,
}

impl Connection {
    async fn statement(&mut self, sql: &str) -> Result<Statement, TargetError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await.map_err(pg_error)?;
        self.statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }
}

impl Documents {
    /// Connects (`conn` is a libpq-style URL or key-value string).
    pub async fn connect(conn: &str, dataset: Dataset) -> Result<Documents, TargetError> {
        let (client, connection) = tokio_postgres::connect(conn, NoTls)
            .await
            .map_err(pg_error)?;
        // The connection object does the I/O; it ends when the client is dropped.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Documents {
            connection: Mutex::new(Connection {
                client,
                statements: HashMap::new(),
            }),
            dataset,
        })
    }

    /// Creates the table afresh (dropping one left by an earlier run).
    pub async fn prepare(&self) -> Result<(), TargetError> {
        let t = self.dataset.name();
        let mut ddl = format!(
            "DROP TABLE IF EXISTS {t};
             CREATE TABLE {t} (key text PRIMARY KEY, doc jsonb NOT NULL);
             CREATE INDEX {t}_gin ON {t} USING gin (doc);"
        );
        if self.dataset == Dataset::Dblp {
            ddl.push_str(&format!("CREATE INDEX {t}_year ON {t} ((doc->'year'));"));
        }
        let c = self.connection.lock().await;
        c.client.batch_execute(&ddl).await.map_err(pg_error)
    }

    /// Gathers the planner's statistics (it needs them to pick the indexes; autovacuum would
    /// gather them eventually).
    pub async fn after_load(&self) -> Result<(), TargetError> {
        let c = self.connection.lock().await;
        c.client
            .batch_execute(&format!("VACUUM ANALYZE {}", self.dataset.name()))
            .await
            .map_err(pg_error)
    }

    /// Stores a record: a merge at the top level, as a put of a document is (no nulls here).
    pub async fn put(&self, e: &Entry) -> Result<(), TargetError> {
        let t = self.dataset.name();
        let sql = format!(
            "INSERT INTO {t} (key, doc) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET doc = {t}.doc || EXCLUDED.doc"
        );
        let mut c = self.connection.lock().await;
        let s = c.statement(&sql).await?;
        c.client
            .execute(&s, &[&e.key, &to_json_doc(e)])
            .await
            .map(|_| ())
            .map_err(pg_error)
    }

    /// Reads a record by key; `Ok(false)` when absent.
    pub async fn get(&self, key: &str) -> Result<bool, TargetError> {
        let sql = format!("SELECT doc FROM {} WHERE key = $1", self.dataset.name());
        let mut c = self.connection.lock().await;
        let s = c.statement(&sql).await?;
        let row = c.client.query_opt(&s, &[&key]).await.map_err(pg_error)?;
        match row {
            None => Ok(false),
            Some(row) => row
                .try_get::<_, serde_json::Value>(0)
                .map(|_| true)
                .map_err(pg_error),
        }
    }

    /// Runs `q`, reading every matching record in full; returns how many matched.
    pub async fn query(&self, q: &Query) -> Result<u64, TargetError> {
        let (sql, params) = sql_of(self.dataset.name(), q);
        let mut c = self.connection.lock().await;
        let s = c.statement(&sql).await?;
        let refs: Vec<&(dyn ToSql + Sync)> = params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = c.client.query(&s, &refs).await.map_err(pg_error)?;
        for row in &rows {
            // Decode every document, as the Tessera client decodes every object.
            row.try_get::<_, serde_json::Value>(1).map_err(pg_error)?;
        }
        Ok(rows.len() as u64)
    }
}

/// The SQL of a query and its parameters: equalities and list memberships as one containment
/// (`doc @> {...}`, served by the GIN index), ranges on the jsonb value (served by the
/// B-tree on `doc->'year'`; jsonb orders numbers among themselves and apart from strings, so
/// a numeric range never matches a string, as in Tessera), structure with `?`, `?|` and
/// `NOT ?`.
fn sql_of(table: &str, q: &Query) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
    let mut contained = serde_json::Map::new();
    let mut clauses: Vec<String> = Vec::new();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    // Containment first: its parameter is $1 when present.
    for c in &q.conds {
        match c {
            Cond::Eq(p, v) => {
                contained.insert((*p).to_owned(), to_json(v));
            }
            Cond::Contains(p, s) => {
                contained.insert((*p).to_owned(), serde_json::json!([s]));
            }
            _ => {}
        }
    }
    if !contained.is_empty() {
        params.push(Box::new(serde_json::Value::Object(contained)));
        clauses.push(format!("doc @> ${}", params.len()));
    }
    for c in &q.conds {
        match c {
            Cond::Range(p, lo, hi) => {
                params.push(Box::new(serde_json::Value::from(*lo)));
                params.push(Box::new(serde_json::Value::from(*hi)));
                let n = params.len();
                clauses.push(format!("doc->'{p}' >= ${} AND doc->'{p}' <= ${n}", n - 1));
            }
            Cond::Exists(ps) if ps.len() == 1 => {
                params.push(Box::new(ps[0].to_owned()));
                clauses.push(format!("doc ? ${}", params.len()));
            }
            Cond::Exists(ps) => {
                params.push(Box::new(
                    ps.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>(),
                ));
                clauses.push(format!("doc ?| ${}", params.len()));
            }
            Cond::Missing(p) => {
                params.push(Box::new((*p).to_owned()));
                clauses.push(format!("NOT (doc ? ${})", params.len()));
            }
            Cond::Eq(..) | Cond::Contains(..) => {}
        }
    }
    let filter = if clauses.is_empty() {
        "TRUE".to_owned()
    } else {
        clauses.join(" AND ")
    };
    (
        format!("SELECT key, doc FROM {table} WHERE {filter}"),
        params,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bibliography::{QueryKind, Val};

    fn query(conds: Vec<Cond>) -> Query {
        Query {
            kind: QueryKind::Title,
            conds,
        }
    }

    #[test]
    fn postgres_sql_puts_values_in_one_containment() {
        let q = query(vec![
            Cond::Missing("doi"),
            Cond::Eq("booktitle", Val::Str("B".into())),
            Cond::Contains("author", "A".into()),
            Cond::Range("year", 2000, 2004),
            Cond::Exists(vec!["note", "cdrom"]),
        ]);
        let (sql, params) = sql_of("t", &q);
        assert_eq!(
            sql,
            "SELECT key, doc FROM t WHERE doc @> $1 AND NOT (doc ? $2) AND doc->'year' >= $3 AND doc->'year' <= $4 AND doc ?| $5"
        );
        assert_eq!(params.len(), 5);
    }
}
