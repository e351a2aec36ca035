//! Workload secondary's `people` table in PostgreSQL: a B-tree index on each searched column,
//! statements prepared once per connection.

use tokio_postgres::{NoTls, Statement};

use crate::secondary::{Person, Query, NAME};
use crate::target::{pg_error, TargetError};

/// The `people` table of workload secondary and its statements: one connection per task.
pub struct People {
    client: tokio_postgres::Client,
    insert: Statement,
    eq1: Statement,
    eq2: Statement,
    range: Statement,
}

impl People {
    /// Connects to PostgreSQL and makes the table and its indexes unless they exist.
    pub async fn connect(url: &str) -> Result<People, TargetError> {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(pg_error)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {NAME} (key text PRIMARY KEY, city text NOT NULL, age bigint NOT NULL, score bigint NOT NULL, name text NOT NULL);
                 CREATE INDEX IF NOT EXISTS {NAME}_city ON {NAME} (city);
                 CREATE INDEX IF NOT EXISTS {NAME}_age ON {NAME} (age);
                 CREATE INDEX IF NOT EXISTS {NAME}_score ON {NAME} (score);"
            ))
            .await
            .map_err(pg_error)?;
        let prepare = |sql: String| {
            let client = &client;
            async move { client.prepare(&sql).await.map_err(pg_error) }
        };
        let insert = prepare(format!(
            "INSERT INTO {NAME} VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO UPDATE SET city = EXCLUDED.city, age = EXCLUDED.age, score = EXCLUDED.score, name = EXCLUDED.name"
        ))
        .await?;
        let eq1 = prepare(format!("SELECT * FROM {NAME} WHERE city = $1")).await?;
        let eq2 = prepare(format!("SELECT * FROM {NAME} WHERE city = $1 AND age = $2")).await?;
        let range = prepare(format!(
            "SELECT * FROM {NAME} WHERE score BETWEEN $1 AND $2"
        ))
        .await?;
        Ok(People {
            client,
            insert,
            eq1,
            eq2,
            range,
        })
    }

    pub async fn insert(&self, p: &Person) -> Result<(), TargetError> {
        self.client
            .execute(&self.insert, &[&p.key, &p.city, &p.age, &p.score, &p.name])
            .await
            .map(|_| ())
            .map_err(pg_error)
    }

    /// Runs `q`, reading every matching row whole; returns how many matched.
    pub async fn query(&self, q: &Query) -> Result<u64, TargetError> {
        let rows = match q {
            Query::Eq1 { city } => self.client.query(&self.eq1, &[city]).await,
            Query::Eq2 { city, age } => self.client.query(&self.eq2, &[city, age]).await,
            Query::Range { lo, hi } => self.client.query(&self.range, &[lo, hi]).await,
        }
        .map_err(pg_error)?;
        Ok(rows.len() as u64)
    }
}
