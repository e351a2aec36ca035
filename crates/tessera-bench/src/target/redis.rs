//! `redis://HOST:PORT`: Redis driven with the same generator and concurrency as Tessera, so the
//! two can be compared in one run (issue 2 item 7).
//!
//! Layout: record `n` is the hash `user{n}` holding `field0..field9`, `prefix` and `suffix`;
//! the sorted set `_ycsb_idx` holds every key scored by `n`, which is how a Redis application
//! would emulate YCSB's ordered scan. A scan is `ZRANGEBYSCORE` over the same records the
//! Tessera search selects (`workload::scan_bounds`), then one pipelined write of `HGETALL` per
//! key. One TCP connection per driver task; commands of one operation are pipelined in a single
//! write, as a careful Redis client would.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Target, TargetError};
use crate::resp::{encode_command, parse_reply, Reply};
use crate::workload::{
    field_name, prefix_suffix, record_key, scan_bounds, Record, FIELD_COUNT, SCAN_GROUP_SIZE,
};

/// The sorted set indexing record keys by record number, for scans.
pub const INDEX_KEY: &str = "_ycsb_idx";

/// How long one operation may wait for its replies before the connection is declared dead.
/// Generous: it exists so a hung server shows up as errors instead of a hung benchmark.
pub const OPERATION_TIMEOUT_MS: u64 = 30_000;

/// Parses `redis://HOST[:PORT]` into `HOST:PORT` (port 6379 when absent). Database numbers,
/// credentials and TLS are not supported: the benchmark drives a local, default-configured server.
pub fn parse_url(url: &str) -> Result<String, String> {
    super::parse_host_port(url, "redis", 6379)
}

/// One connection per driver task; reconnects on the next operation after an I/O error.
#[derive(Debug)]
pub struct RedisTarget {
    addr: String,
    conn: Option<Connection>,
    /// Commands of the current operation, sent in one write.
    out: BytesMut,
}

#[derive(Debug)]
struct Connection {
    stream: TcpStream,
    /// Bytes read but not yet parsed into replies.
    input: BytesMut,
}

impl Connection {
    async fn open(addr: &str) -> Result<Connection, TargetError> {
        let stream = TcpStream::connect(addr).await?;
        // Requests are small and latency-bound: do not let Nagle hold them back.
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            input: BytesMut::with_capacity(16 * 1024),
        })
    }

    /// Sends `out` and reads exactly `replies` replies.
    async fn round_trip(&mut self, out: &[u8], replies: usize) -> Result<Vec<Reply>, TargetError> {
        self.stream.write_all(out).await?;
        let mut got = Vec::with_capacity(replies);
        while got.len() < replies {
            match parse_reply(&self.input).map_err(|e| TargetError::Protocol(e.to_string()))? {
                Some((reply, used)) => {
                    let _ = self.input.split_to(used);
                    got.push(reply);
                }
                None => {
                    if self.input.capacity() - self.input.len() < 4096 {
                        self.input.reserve(16 * 1024);
                    }
                    let n = self.stream.read_buf(&mut self.input).await?;
                    if n == 0 {
                        return Err(TargetError::Io(std::io::ErrorKind::UnexpectedEof.into()));
                    }
                }
            }
        }
        Ok(got)
    }
}

impl RedisTarget {
    /// Connects now, so an unreachable server fails the benchmark at start instead of turning
    /// every operation into an error.
    pub async fn connect(addr: &str) -> Result<RedisTarget, TargetError> {
        let conn = Connection::open(addr).await?;
        Ok(RedisTarget {
            addr: addr.to_owned(),
            conn: Some(conn),
            out: BytesMut::with_capacity(4096),
        })
    }

    fn command(&mut self, args: &[&[u8]]) {
        encode_command(&mut self.out, args);
    }

    /// Sends the queued commands and returns their `replies` replies; server error replies are
    /// returned as `Reply::Error` for the caller to judge. After an I/O or protocol error or a
    /// timeout the connection's state is unknown, so it is dropped and reopened next time.
    async fn flush(&mut self, replies: usize) -> Result<Vec<Reply>, TargetError> {
        let out = self.out.split();
        if self.conn.is_none() {
            self.conn = Some(Connection::open(&self.addr).await?);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(TargetError::Protocol("no connection".into()));
        };
        let timeout = Duration::from_millis(OPERATION_TIMEOUT_MS);
        let result = match tokio::time::timeout(timeout, conn.round_trip(&out, replies)).await {
            Ok(r) => r,
            Err(_) => Err(TargetError::Io(std::io::ErrorKind::TimedOut.into())),
        };
        if result.is_err() {
            self.conn = None;
        }
        result
    }
}

/// Turns a reply into an error if the server refused the command.
fn check(reply: Reply) -> Result<Reply, TargetError> {
    match reply {
        Reply::Error(e) => Err(TargetError::Server(e)),
        other => Ok(other),
    }
}

/// `HGETALL` of a missing key is an empty array.
fn hash_found(reply: Reply) -> Result<bool, TargetError> {
    match check(reply)? {
        Reply::Array(Some(items)) => Ok(!items.is_empty()),
        Reply::Array(None) => Ok(false),
        other => Err(TargetError::Protocol(format!("HGETALL replied {other:?}"))),
    }
}

impl Target for RedisTarget {
    async fn prepare(&mut self) -> Result<(), TargetError> {
        self.command(&[b"PING"]);
        let mut replies = self.flush(1).await?;
        check(replies.pop().unwrap_or(Reply::Bulk(None)))?;
        Ok(())
    }

    async fn insert(&mut self, n: u64, record: &Record) -> Result<(), TargetError> {
        let key = record_key(n);
        let (prefix, suffix) = prefix_suffix(n);
        let (prefix, suffix, score) = (prefix.to_string(), suffix.to_string(), n.to_string());
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * FIELD_COUNT + 4);
        args.push(b"HSET");
        args.push(key.as_bytes());
        for (i, value) in record.fields.iter().enumerate() {
            args.push(field_name(i).as_bytes());
            args.push(value.as_bytes());
        }
        args.extend_from_slice(&[b"prefix", prefix.as_bytes(), b"suffix", suffix.as_bytes()]);
        self.command(&args);
        self.command(&[
            b"ZADD",
            INDEX_KEY.as_bytes(),
            score.as_bytes(),
            key.as_bytes(),
        ]);
        for reply in self.flush(2).await? {
            check(reply)?;
        }
        Ok(())
    }

    async fn read(&mut self, n: u64) -> Result<bool, TargetError> {
        let key = record_key(n);
        self.command(&[b"HGETALL", key.as_bytes()]);
        let mut replies = self.flush(1).await?;
        hash_found(replies.pop().unwrap_or(Reply::Array(None)))
    }

    async fn update(&mut self, n: u64, field: usize, value: &str) -> Result<(), TargetError> {
        let key = record_key(n);
        self.command(&[
            b"HSET",
            key.as_bytes(),
            field_name(field).as_bytes(),
            value.as_bytes(),
        ]);
        for reply in self.flush(1).await? {
            check(reply)?;
        }
        Ok(())
    }

    async fn scan(&mut self, n: u64, len: u64) -> Result<u64, TargetError> {
        let (prefix, lo, hi) = scan_bounds(n, len);
        let base = prefix as u64 * SCAN_GROUP_SIZE;
        let (min, max) = (
            (base + lo as u64).to_string(),
            (base + hi as u64).to_string(),
        );
        self.command(&[
            b"ZRANGEBYSCORE",
            INDEX_KEY.as_bytes(),
            min.as_bytes(),
            max.as_bytes(),
        ]);
        let keys = match check(self.flush(1).await?.pop().unwrap_or(Reply::Array(None)))? {
            Reply::Array(Some(items)) => items,
            Reply::Array(None) => Vec::new(),
            other => {
                return Err(TargetError::Protocol(format!(
                    "ZRANGEBYSCORE replied {other:?}"
                )))
            }
        };
        if keys.is_empty() {
            return Ok(0);
        }
        let count = keys.len();
        for key in keys {
            let Reply::Bulk(Some(key)) = key else {
                return Err(TargetError::Protocol(format!(
                    "ZRANGEBYSCORE member {key:?}"
                )));
            };
            self.command(&[b"HGETALL", &key]);
        }
        let mut found = 0;
        for reply in self.flush(count).await? {
            if hash_found(reply)? {
                found += 1;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_urls() {
        assert_eq!(
            parse_url("redis://127.0.0.1:6380"),
            Ok("127.0.0.1:6380".into())
        );
        assert_eq!(parse_url("redis://localhost"), Ok("localhost:6379".into()));
        assert_eq!(
            parse_url("redis://localhost:7000/"),
            Ok("localhost:7000".into())
        );
        assert_eq!(parse_url("redis://[::1]:7000"), Ok("[::1]:7000".into()));
        assert_eq!(parse_url("redis://[::1]"), Ok("[::1]:6379".into()));
        assert!(parse_url("redis://h:notaport").is_err());
        assert!(parse_url("redis://h:1/2").is_err());
        assert!(parse_url("tessera://h:1").is_err());
        assert!(parse_url("redis://").is_err());
    }
}
