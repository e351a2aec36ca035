//! `tessera://HOST:PORT`: the Tessera target.
//!
//! NOT YET WIRED: it is written against `tessera-client`, which has not landed yet. Until it
//! does, `connect` fails with `TargetError::Unsupported` and `run` reports
//! `BenchError::TargetUnsupported`. The space and the scan predicates it will use are already
//! fixed in `workload` (`SPACE_DESCRIPTION`, `scan_bounds`).

use super::{Target, TargetError};
use crate::workload::Record;

/// Parses `tessera://HOST:PORT` into `HOST:PORT` (port 1982, the `tessera dev` default, when
/// absent).
pub fn parse_url(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("tessera://").ok_or_else(|| format!("{url:?} does not start with tessera://"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains('/') {
        return Err(format!("{url:?}: expected tessera://HOST:PORT"));
    }
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !port.contains(']') => {
            port.parse::<u16>().map_err(|_| format!("{url:?}: bad port {port:?}"))?;
            Ok(rest.to_owned())
        }
        _ => Ok(format!("{rest}:1982")),
    }
}

/// Placeholder until `tessera-client` lands; see the module documentation.
#[derive(Clone, Debug)]
pub struct TesseraTarget {
    _private: (),
}

impl TesseraTarget {
    pub async fn connect(addr: &str) -> Result<TesseraTarget, TargetError> {
        Err(TargetError::Unsupported(format!(
            "tessera://{addr}: the Tessera target is not wired yet (tessera-client has not landed)"
        )))
    }
}

fn unwired() -> TargetError {
    TargetError::Unsupported("the Tessera target is not wired yet".into())
}

impl Target for TesseraTarget {
    async fn prepare(&mut self) -> Result<(), TargetError> {
        Err(unwired())
    }

    async fn insert(&mut self, _n: u64, _record: &Record) -> Result<(), TargetError> {
        Err(unwired())
    }

    async fn read(&mut self, _n: u64) -> Result<bool, TargetError> {
        Err(unwired())
    }

    async fn update(&mut self, _n: u64, _field: usize, _value: &str) -> Result<(), TargetError> {
        Err(unwired())
    }

    async fn scan(&mut self, _n: u64, _len: u64) -> Result<u64, TargetError> {
        Err(unwired())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tessera_urls() {
        assert_eq!(parse_url("tessera://127.0.0.1:1982"), Ok("127.0.0.1:1982".into()));
        assert_eq!(parse_url("tessera://localhost"), Ok("localhost:1982".into()));
        assert!(parse_url("tessera://h:x").is_err());
        assert!(parse_url("redis://h:1").is_err());
    }
}
