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
use tessera_types::{SpaceSchema, Subspace, SubspaceId};

use super::{client_error, Target, TargetError};
use crate::workload::{
    field_name, prefix_suffix, record_key, scan_bounds, Record, SPACE_DESCRIPTION, SPACE_NAME,
};

/// Parses `tessera://HOST:PORT` into `HOST:PORT` (port 1982, the `tessera dev` default, when
/// absent).
pub fn parse_url(url: &str) -> Result<String, String> {
    super::parse_host_port(url, "tessera", 1982)
}

/// How long a benchmark waits for the database's re-cut driver after a load, unless told.
pub const RECUT_WAIT: Duration = Duration::from_secs(600);

/// How long no build may be under way before [`wait_for_recuts`] concludes that the re-cut
/// driver will not cut what is left: three looks at its default period (10 s).
pub const RECUT_IDLE_MAX: Duration = Duration::from_secs(30);

/// Waits until the database's re-cut driver (on by default in `tessera dev`) has cut by the
/// data every searchable subspace of `space` that `must_be_cut` picks, and no build is under
/// way; or until no build has been under way for [`RECUT_IDLE_MAX`] (the driver leaves alone
/// a subspace whose regions are balanced enough, or that holds too few objects). A benchmark
/// that timed searches before would time equal slices of an int axis (every value of a real
/// distribution in one region) and the re-cut's own work beside them. Returns how long it
/// waited and the subspaces left uncut; waiting longer than `most` is an error.
pub async fn wait_for_recuts(
    client: &Client,
    space: &str,
    most: Duration,
    must_be_cut: impl Fn(&SpaceSchema, &Subspace) -> bool,
) -> Result<(Duration, Vec<SubspaceId>), TargetError> {
    let started = Instant::now();
    let mut idle_since = started;
    loop {
        let config = client.refresh().await.map_err(client_error)?;
        let (building, uncut) = match config.space(space) {
            Some(s) => (
                s.build.is_some(),
                s.schema
                    .searchable_subspaces()
                    .filter(|id| {
                        let subspace = s.schema.subspace(*id);
                        subspace.cuts.is_none() && must_be_cut(&s.schema, subspace)
                    })
                    .collect(),
            ),
            None => (false, Vec::new()),
        };
        if building {
            idle_since = Instant::now();
        } else if uncut.is_empty() || idle_since.elapsed() >= RECUT_IDLE_MAX {
            return Ok((started.elapsed(), uncut));
        }
        if started.elapsed() > most {
            return Err(TargetError::Server(format!(
                "the subspaces of {space} were still being re-cut {} s after the load",
                most.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Says on stderr what [`wait_for_recuts`] found.
pub fn report_recuts(space: &str, (waited, uncut): &(Duration, Vec<SubspaceId>)) {
    let waited = waited.as_secs_f64();
    if uncut.is_empty() {
        eprintln!(
            "tessera-bench: the re-cut driver cut {space} by the data {waited:.0} s after the load"
        );
    } else {
        let uncut: Vec<_> = uncut.iter().map(|id| id.get().to_string()).collect();
        eprintln!(
            "tessera-bench: {waited:.0} s after the load, the re-cut driver had left subspaces {} of {space} uncut",
            uncut.join(", ")
        );
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
