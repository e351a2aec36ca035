//! `tessera://HOST:PORT`: Tessera through `tessera-client`.
//!
//! Every driver task holds a clone of one `Client`: the client pipelines, so N tasks put N
//! requests in flight on one connection, which is how a Tessera application is meant to use
//! it. (If that connection fails, every later operation fails and is counted as an error; the
//! client does not reconnect by itself, and neither does this target.)
//!
//! Record `n` is the object `user{n}` in space `ycsb` (`workload::SPACE_DESCRIPTION`) with
//! `field0..field9` and the scan attributes `prefix`, `suffix`; a scan is the search
//! `prefix == p && suffix in [lo, hi]`, which the `prefix, suffix` subspace answers from one
//! region (seed 002 §6.2).

use std::time::{Duration, Instant};

use tessera_client::{Client, Predicate, PredicateOp, Status, Value};
use tessera_types::{SpaceSchema, Subspace};

use super::{client_error, Target, TargetError};
use crate::workload::{
    field_name, prefix_suffix, record_key, scan_bounds, Record, SPACE_DESCRIPTION, SPACE_NAME,
};

/// Parses `tessera://HOST:PORT` into `HOST:PORT` (port 1982, the `tessera dev` default, when
/// absent).
pub fn parse_url(url: &str) -> Result<String, String> {
    super::parse_host_port(url, "tessera", 1982)
}

/// How long a benchmark waits for the database's re-cut driver after a load.
pub const RECUT_WAIT: Duration = Duration::from_secs(600);

/// Waits until the database's re-cut driver (on by default in `tessera dev`) has cut by the
/// data every searchable subspace of `space` that `must_be_cut` picks, and no build is under
/// way; returns how long that took. A benchmark that timed searches before would time equal
/// slices of an int axis (every value of a real distribution in one region) and the re-cut's
/// own work beside them. A timeout ([`RECUT_WAIT`]) is an error.
pub async fn wait_for_recuts(
    client: &Client,
    space: &str,
    must_be_cut: impl Fn(&SpaceSchema, &Subspace) -> bool,
) -> Result<Duration, TargetError> {
    let started = Instant::now();
    loop {
        let config = client.refresh().await.map_err(client_error)?;
        let settled = config.space(space).is_some_and(|s| {
            s.build.is_none()
                && s.schema.searchable_subspaces().all(|id| {
                    let subspace = s.schema.subspace(id);
                    subspace.cuts.is_some() || !must_be_cut(&s.schema, subspace)
                })
        });
        if settled {
            return Ok(started.elapsed());
        }
        if started.elapsed() > RECUT_WAIT {
            return Err(TargetError::Server(format!(
                "the subspaces of {space} were not re-cut within {} s of the load (is the re-cut driver on?)",
                RECUT_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One task's handle on the shared pipelined client.
#[derive(Clone)]
pub struct TesseraTarget {
    client: Client,
}

impl TesseraTarget {
    /// Connects with `options` (a token, TLS: the global `--token` and `--tls-ca`).
    pub async fn connect(
        addr: &str,
        options: tessera_client::ClientOptions,
    ) -> Result<TesseraTarget, TargetError> {
        Ok(TesseraTarget {
            client: Client::connect_with(addr, options)
                .await
                .map_err(client_error)?,
        })
    }
}

/// The attributes the benchmark writes and searches; an existing `ycsb` space without them
/// would turn every operation into an error, so `prepare` checks for them.
const SCAN_ATTRIBUTES: [&str; 2] = ["prefix", "suffix"];

impl Target for TesseraTarget {
    /// Creates space `ycsb` unless it exists (a second `load` reuses it and overwrites records).
    async fn prepare(&mut self) -> Result<(), TargetError> {
        match self.client.add_space(SPACE_DESCRIPTION).await {
            Ok(()) => return Ok(()),
            Err(e) if e.status() == Some(Status::SpaceExists) => {}
            Err(e) => return Err(client_error(e)),
        }
        let schema = self
            .client
            .describe_space(SPACE_NAME)
            .await
            .map_err(client_error)?;
        for attr in SCAN_ATTRIBUTES {
            if !schema.attributes.iter().any(|a| a.name == attr) {
                return Err(TargetError::Server(format!(
                    "space {SPACE_NAME:?} exists without attribute {attr:?}: remove it (tessera rm-space {SPACE_NAME}) and load again"
                )));
            }
        }
        Ok(())
    }

    async fn insert(&mut self, n: u64, record: &Record) -> Result<(), TargetError> {
        let (prefix, suffix) = prefix_suffix(n);
        let mut attrs: Vec<(&str, Value)> = record
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| (field_name(i), Value::from(f.clone())))
            .collect();
        attrs.push(("prefix", Value::Int(prefix)));
        attrs.push(("suffix", Value::Int(suffix)));
        self.client
            .put(SPACE_NAME, record_key(n), attrs)
            .await
            .map_err(client_error)
    }

    async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
        match self.client.get(SPACE_NAME, record_key(n)).await {
            Ok(found) => Ok(found.is_some()),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(client_error(e)),
        }
    }

    async fn update(&mut self, n: u64, field: usize, value: &str) -> Result<(), TargetError> {
        let attrs = [(field_name(field), Value::from(value.to_owned()))];
        self.client
            .put(SPACE_NAME, record_key(n), attrs)
            .await
            .map_err(client_error)
    }

    async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
        let (prefix, lo, hi) = scan_bounds(n, len);
        let predicates = vec![
            Predicate::equals("prefix", Value::Int(prefix)),
            Predicate::new("suffix", PredicateOp::Range(Value::Int(lo), Value::Int(hi))),
        ];
        let found = self
            .client
            .search(SPACE_NAME, predicates)
            .await
            .map_err(client_error)?;
        Ok(found.len() as u64)
    }

    /// `prefix == n/1000 && suffix == n%1000`: every dimension of the `prefix, suffix`
    /// subspace fixed, so the server reads one cell of one region.
    async fn search(&mut self, n: u64) -> Result<u64, TargetError> {
        let (prefix, suffix) = prefix_suffix(n);
        let predicates = vec![
            Predicate::equals("prefix", Value::Int(prefix)),
            Predicate::equals("suffix", Value::Int(suffix)),
        ];
        let found = self
            .client
            .search(SPACE_NAME, predicates)
            .await
            .map_err(client_error)?;
        Ok(found.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tessera_urls() {
        assert_eq!(
            parse_url("tessera://127.0.0.1:1982"),
            Ok("127.0.0.1:1982".into())
        );
        assert_eq!(
            parse_url("tessera://localhost"),
            Ok("localhost:1982".into())
        );
        assert!(parse_url("tessera://h:x").is_err());
        assert!(parse_url("redis://h:1").is_err());
    }
}
