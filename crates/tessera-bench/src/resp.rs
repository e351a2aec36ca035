//! A minimal RESP2 codec (the Redis serialization protocol) — only what the benchmark's Redis
//! target needs: commands as arrays of bulk strings, and every reply type RESP2 defines.
//!
//! Pure functions over byte buffers, so the framing is unit-tested without a server; the I/O
//! shell is `target::redis`. Written here instead of depending on the `redis` crate to keep the
//! client side of the comparison as thin as our own client: one write per batch, no pooling,
//! no hidden retries.

use bytes::{BufMut, BytesMut};

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`: the server refused the command.
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$n` bulk string; `None` is the nil bulk `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `*n` array; `None` is the nil array `*-1`.
    Array(Option<Vec<Reply>>),
}

/// Bytes that are not RESP2.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed RESP reply: {0}")]
pub struct RespError(pub String);

/// Replies nest at most this deep before we call the stream malformed (the commands we send
/// return depth ≤ 2); bounds recursion on hostile input.
const DEPTH_MAX: usize = 8;

/// Appends `args` as one RESP command (an array of bulk strings) to `buf`.
pub fn encode_command(buf: &mut BytesMut, args: &[&[u8]]) {
    buf.put_u8(b'*');
    buf.put_slice(args.len().to_string().as_bytes());
    buf.put_slice(b"\r\n");
    for arg in args {
        buf.put_u8(b'$');
        buf.put_slice(arg.len().to_string().as_bytes());
        buf.put_slice(b"\r\n");
        buf.put_slice(arg);
        buf.put_slice(b"\r\n");
    }
}

/// Parses one reply from the front of `buf`: `Ok(Some((reply, bytes_used)))`, or `Ok(None)` when
/// the reply is not complete yet (read more and call again).
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, RespError> {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(Reply, usize)>, RespError> {
    if depth > DEPTH_MAX {
        return Err(RespError("replies nested too deep".into()));
    }
    let Some(line_end) = find_crlf(buf, at) else {
        return Ok(None);
    };
    if line_end == at {
        return Err(RespError("empty line".into()));
    }
    let kind = buf[at];
    let line = &buf[at + 1..line_end];
    let after_line = line_end + 2;
    match kind {
        b'+' => Ok(Some((Reply::Simple(utf8(line)?), after_line))),
        b'-' => Ok(Some((Reply::Error(utf8(line)?), after_line))),
        b':' => Ok(Some((Reply::Integer(integer(line)?), after_line))),
        b'$' => {
            let len = integer(line)?;
            if len == -1 {
                return Ok(Some((Reply::Bulk(None), after_line)));
            }
            let len = usize::try_from(len).map_err(|_| RespError(format!("bulk length {len}")))?;
            let end = after_line + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(RespError("bulk string not terminated by CRLF".into()));
            }
            Ok(Some((
                Reply::Bulk(Some(buf[after_line..end].to_vec())),
                end + 2,
            )))
        }
        b'*' => {
            let len = integer(line)?;
            if len == -1 {
                return Ok(Some((Reply::Array(None), after_line)));
            }
            let len = usize::try_from(len).map_err(|_| RespError(format!("array length {len}")))?;
            // Do not trust the announced length for the allocation: each element takes ≥ 3 bytes.
            let mut items = Vec::with_capacity(len.min(buf.len() / 3 + 1));
            let mut pos = after_line;
            for _ in 0..len {
                match parse_at(buf, pos, depth + 1)? {
                    Some((item, next)) => {
                        items.push(item);
                        pos = next;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(Some(items)), pos)))
        }
        other => Err(RespError(format!("unknown reply type byte {other:#04x}"))),
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn utf8(bytes: &[u8]) -> Result<String, RespError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| RespError("status line is not UTF-8".into()))
}

fn integer(bytes: &[u8]) -> Result<i64, RespError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| RespError(format!("bad integer {:?}", String::from_utf8_lossy(bytes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands_as_bulk_arrays() {
        let mut buf = BytesMut::new();
        encode_command(&mut buf, &[b"HSET", b"user1", b"field0", b""]);
        assert_eq!(
            &buf[..],
            b"*4\r\n$4\r\nHSET\r\n$5\r\nuser1\r\n$6\r\nfield0\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn parses_every_reply_type() {
        let input =
            b"+OK\r\n-ERR wrong\r\n:42\r\n$3\r\nfoo\r\n$-1\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n*-1\r\n";
        let mut at = 0;
        let mut replies = Vec::new();
        while at < input.len() {
            let (r, used) = parse_reply(&input[at..]).expect("valid").expect("complete");
            replies.push(r);
            at += used;
        }
        assert_eq!(
            replies,
            vec![
                Reply::Simple("OK".into()),
                Reply::Error("ERR wrong".into()),
                Reply::Integer(42),
                Reply::Bulk(Some(b"foo".to_vec())),
                Reply::Bulk(None),
                Reply::Array(Some(vec![
                    Reply::Bulk(Some(b"a".to_vec())),
                    Reply::Array(Some(vec![Reply::Integer(1)]))
                ])),
                Reply::Array(None),
            ]
        );
    }

    #[test]
    fn incomplete_input_asks_for_more_at_every_cut() {
        let input = b"*2\r\n$5\r\nhello\r\n:7\r\n";
        for cut in 0..input.len() {
            assert_eq!(parse_reply(&input[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(parse_reply(input).expect("valid").is_some());
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_reply(b"?what\r\n").is_err());
        assert!(parse_reply(b":x1\r\n").is_err());
        assert!(parse_reply(b"$3\r\nfooXY").is_err());
        assert!(parse_reply(b"$-5\r\n").is_err());
        let deep = "*1\r\n".repeat(DEPTH_MAX + 2);
        assert!(parse_reply(deep.as_bytes()).is_err());
    }
}
