//! Frame encoding: a length prefix (by `tokio_util`'s `LengthDelimitedCodec`), then the
//! protocol version byte, then postcard.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{FramedWrite, LengthDelimitedCodec};

use crate::constants::FRAME_BYTES_MAX;
use crate::message::{RequestFrame, Response, ResponseFrame};
use crate::status::ErrorReply;
use tessera_types::{Epoch, Version};

/// The protocol version this build speaks: every frame's first byte. A frame with another
/// version is refused with [`Status::UnsupportedProtocol`](crate::Status::UnsupportedProtocol).
/// 5 (29 November 2026): resting servers (`ServerState::Resting`, `SpaceConfig::resting`,
/// `Request::RestServer`) and the stopping server's goodbye.
pub const PROTOCOL_VERSION: u8 = 5;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("empty frame")]
    Empty,
    #[error("protocol version {0}, this build speaks {PROTOCOL_VERSION}")]
    UnsupportedVersion(u8),
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
    #[error("frame of {0} bytes is over the {FRAME_BYTES_MAX}-byte limit")]
    TooLarge(usize),
}

/// The length-prefix codec both sides use: 4-byte big-endian length, at most
/// [`FRAME_BYTES_MAX`] bytes of body.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(FRAME_BYTES_MAX)
        .new_codec()
}

/// Encodes any message as a frame body (version byte, then postcard). Servers use it for the
/// chain messages they exchange after a `PeerHello`.
pub fn encode<T: serde::Serialize>(value: &T) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::with_capacity(128).writer();
    std::io::Write::write_all(&mut buf, &[PROTOCOL_VERSION]).expect("writing to memory");
    let buf = postcard::to_io(value, buf)?;
    let bytes = buf.into_inner().freeze();
    if bytes.len() > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge(bytes.len()));
    }
    Ok(bytes)
}

/// Decodes a frame body made by [`encode`].
pub fn decode<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, FrameError> {
    match body.split_first() {
        None => Err(FrameError::Empty),
        Some((&PROTOCOL_VERSION, rest)) => Ok(postcard::from_bytes(rest)?),
        Some((&v, _)) => Err(FrameError::UnsupportedVersion(v)),
    }
}

pub fn encode_request(frame: &RequestFrame) -> Result<Bytes, FrameError> {
    encode(frame)
}

pub fn decode_request(body: &[u8]) -> Result<RequestFrame, FrameError> {
    decode(body)
}

pub fn encode_response(frame: &ResponseFrame) -> Result<Bytes, FrameError> {
    encode(frame)
}

pub fn decode_response(body: &[u8]) -> Result<ResponseFrame, FrameError> {
    decode(body)
}

/// A `SearchItems` response put together from objects in their stored encoding,
/// `postcard(Object)`, so that a search streams its matches without decoding and re-encoding
/// each. The frame is byte for byte the encoding of `Response::SearchItems` of the same
/// objects: a `WireObject` encodes as its version (a varint), then its values as an `Object`
/// encodes them (their count, then each value).
#[derive(Debug, Default)]
pub struct SearchItemsBuilder {
    /// The items so far, each `varint(version) | postcard(Object)`.
    items: Vec<u8>,
    count: u64,
}

impl SearchItemsBuilder {
    pub fn new() -> SearchItemsBuilder {
        SearchItemsBuilder::default()
    }

    /// A builder that writes its items into `buffer` (emptied first): a search reuses one
    /// buffer from the last, rather than growing a new one into fresh memory every time.
    pub fn with_buffer(mut buffer: Vec<u8>) -> SearchItemsBuilder {
        buffer.clear();
        SearchItemsBuilder {
            items: buffer,
            count: 0,
        }
    }

    /// The buffer back, for the next builder.
    pub fn into_buffer(self) -> Vec<u8> {
        self.items
    }

    /// Adds an object: its version, and its values encoded as `postcard(Object)`.
    pub fn push(&mut self, version: Version, object: &[u8]) {
        put_varint(&mut self.items, version.0);
        self.items.extend_from_slice(object);
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the items so far.
    pub fn bytes(&self) -> usize {
        self.items.len()
    }

    /// The frame body of `SearchItems` with the items so far, answering request `id`; the
    /// builder is empty afterwards.
    pub fn take_frame(&mut self, id: u64, epoch: Epoch) -> Result<Bytes, FrameError> {
        // The frame of no items ends in their count, 0, a one-byte varint: replace it.
        let head = encode(&ResponseFrame {
            id,
            epoch,
            response: Response::SearchItems(Vec::new()),
        })?;
        debug_assert_eq!(head.last(), Some(&0));
        let mut count = Vec::with_capacity(10);
        put_varint(&mut count, self.count);
        let len = head.len() - 1 + count.len() + self.items.len();
        if len > FRAME_BYTES_MAX {
            return Err(FrameError::TooLarge(len));
        }
        let mut frame = BytesMut::with_capacity(len);
        frame.extend_from_slice(&head[..head.len() - 1]);
        frame.extend_from_slice(&count);
        frame.extend_from_slice(&self.items);
        self.items.clear();
        self.count = 0;
        Ok(frame.freeze())
    }
}

/// `value` as postcard encodes a `u64`: 7 bits a byte, least significant first.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The request id of a frame that could not be fully decoded, when its header survived:
/// lets the server answer `Malformed` to the right request instead of dropping it silently.
pub fn peek_request_id(body: &[u8]) -> Option<u64> {
    match body.split_first() {
        Some((&PROTOCOL_VERSION, rest)) => postcard::take_from_bytes::<u64>(rest)
            .ok()
            .map(|(id, _)| id),
        _ => None,
    }
}

/// Tells a connection why it is closed — one frame about the connection (id 0), which a
/// client fails its requests with — and closes it, all within a second. The close is graceful:
/// closing with the client's request unread would reset the connection, and a reset can make
/// the client lose the answer before reading it.
pub async fn tell_and_close(tcp: TcpStream, error: ErrorReply) {
    let frame = ResponseFrame {
        id: 0,
        epoch: Epoch(0),
        response: Response::Error(error),
    };
    let Ok(body) = encode_response(&frame) else {
        return;
    };
    let mut sink = FramedWrite::new(tcp, codec());
    let told = async {
        sink.send(body).await?;
        let mut tcp = sink.into_inner();
        tcp.shutdown().await?;
        let mut discard = [0u8; 4096];
        while tcp.read(&mut discard).await? > 0 {}
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), told).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Request, Response};
    use crate::status::{ErrorReply, Status};
    use proptest::prelude::*;
    use tessera_types::{Epoch, Funcall, Predicate, Value};

    #[test]
    fn round_trip() {
        let frame = RequestFrame {
            id: 7,
            epoch: Epoch(3),
            request: Request::Put {
                space: "s".into(),
                key: Value::from("k"),
                mode: crate::WriteMode::Upsert,
                conditions: vec![Predicate::equals("a", 1i64)],
                funcalls: vec![Funcall::set("a", 2i64)],
            },
        };
        let bytes = encode_request(&frame).unwrap();
        assert_eq!(decode_request(&bytes).unwrap(), frame);
        assert_eq!(peek_request_id(&bytes), Some(7));
        let resp = ResponseFrame {
            id: 9,
            epoch: Epoch(1),
            response: Response::Error(ErrorReply::new(Status::NotFound, "x")),
        };
        assert_eq!(
            decode_response(&encode_response(&resp).unwrap()).unwrap(),
            resp
        );
    }

    #[test]
    fn heartbeats_round_trip_and_server_states_keep_their_indices() {
        use crate::config::ServerState;
        use crate::message::CoordinatorStatus;
        use crate::message::{HeartbeatReply, ServerLiveness};
        use tessera_types::ServerId;
        let frame = RequestFrame {
            id: 3,
            epoch: Epoch(0),
            request: Request::Heartbeat {
                server: ServerId(2),
                token: u128::MAX,
                incarnation: 1 << 60,
                failed: true,
                epoch: Epoch(7),
            },
        };
        assert_eq!(
            decode_request(&encode_request(&frame).unwrap()).unwrap(),
            frame
        );
        let reply = HeartbeatReply {
            leader: true,
            state: ServerState::Offline,
            epoch: Epoch(9),
            lease_ms: 1000,
        };
        let resp = ResponseFrame {
            id: 3,
            epoch: Epoch(9),
            response: Response::Heartbeat(reply),
        };
        assert_eq!(
            decode_response(&encode_response(&resp).unwrap()).unwrap(),
            resp
        );
        let status = CoordinatorStatus {
            id: 1,
            leader: Some(1),
            term: 2,
            last_applied: 5,
            members: vec![(1, "a:1".into())],
            epoch: Epoch(4),
            servers: vec![
                ServerLiveness {
                    id: ServerId(1),
                    heard_ms_ago: Some(120),
                    epoch: Some(Epoch(4)),
                },
                ServerLiveness {
                    id: ServerId(2),
                    heard_ms_ago: None,
                    epoch: None,
                },
            ],
        };
        let resp = ResponseFrame {
            id: 4,
            epoch: Epoch(4),
            response: Response::CoordinatorStatus(status),
        };
        assert_eq!(
            decode_response(&encode_response(&resp).unwrap()).unwrap(),
            resp
        );
        // Postcard encodes enum variants by index: `Available` must stay the first.
        assert_eq!(postcard::to_allocvec(&ServerState::Available).unwrap(), [0]);
        assert_eq!(postcard::to_allocvec(&ServerState::Offline).unwrap(), [1]);
        assert_eq!(postcard::to_allocvec(&ServerState::Leaving).unwrap(), [2]);
        assert_eq!(Status::Timeout.code(), 8017);
        assert_eq!(Status::StaleServer.code(), 8018);
        assert_eq!(Status::BadAlteration.code(), 8019);
        assert_eq!(Status::Unauthorized.code(), 8020);
        assert_eq!(Status::UpdatePending.code(), 8021);
    }

    #[test]
    fn bad_version_and_empty_are_refused() {
        assert!(matches!(decode_request(&[]), Err(FrameError::Empty)));
        assert!(matches!(
            decode_request(&[99, 0]),
            Err(FrameError::UnsupportedVersion(99))
        ));
    }

    proptest! {
        /// A frame built from stored encodings is the frame of the decoded objects.
        #[test]
        fn search_items_from_encodings_are_the_encoded_response(
            id in any::<u64>(), epoch in any::<u64>(),
            objects in proptest::collection::vec((any::<u64>(), proptest::collection::vec(
                prop_oneof![any::<i64>().prop_map(Value::Int), ".{0,8}".prop_map(Value::from), proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::from)], 1..4)), 0..20),
        ) {
            let mut builder = SearchItemsBuilder::new();
            for (version, values) in &objects {
                let object = postcard::to_allocvec(&tessera_types::Object { values: values.clone() }).unwrap();
                builder.push(tessera_types::Version(*version), &object);
            }
            prop_assert_eq!(builder.count(), objects.len() as u64);
            let built = builder.take_frame(id, Epoch(epoch)).unwrap();
            prop_assert!(builder.is_empty());
            let expected = encode_response(&ResponseFrame {
                id,
                epoch: Epoch(epoch),
                response: Response::SearchItems(objects.iter().map(|(v, values)| crate::message::WireObject {
                    version: tessera_types::Version(*v),
                    values: values.clone(),
                }).collect()),
            }).unwrap();
            prop_assert_eq!(built, expected);
        }
    }

    proptest! {
        /// No byte string makes the decoder panic; truncations of a valid frame never decode
        /// into a different request silently.
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }

        #[test]
        fn truncated_frames_fail(cut in 1usize..40) {
            let frame = RequestFrame { id: 1, epoch: Epoch(1), request: Request::Get { space: "space".into(), key: Value::from("a-key-of-some-length") } };
            let bytes = encode_request(&frame).unwrap();
            let cut = cut.min(bytes.len() - 1);
            prop_assert!(decode_request(&bytes[..cut]).is_err());
        }
    }
}
