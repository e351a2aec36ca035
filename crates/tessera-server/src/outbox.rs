//! A connection's responses: the queue to its writer task, and the right to answer one request.
//!
//! Whoever answers — the connection's own task, a search on the blocking pool, the chain loop —
//! encodes a response frame and queues it here; the connection's writer task writes every
//! frame that is ready and flushes once (write batching).
//!
//! What is queued is bounded in bytes ([`OUTBOX_BYTES_MAX`]), not in frames: a frame takes its
//! size in `room` until it is written to the socket. A client that does not read its answers
//! fills the room; from then on a search streaming to it waits, and the connection's reader
//! stops reading its requests ([`Outbox::wait_for_room`]). The server stops producing for a
//! slow reader instead of buffering for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::SinkExt;
use tessera_protocol::{
    codec, encode_response, ErrorReply, FrameError, Response, ResponseFrame, Status,
};
use tessera_types::Epoch;
use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::FramedWrite;

use crate::observe::Meter;

/// Bytes of encoded responses queued for one connection and not yet written to its socket.
/// Enough to keep a fast client's socket busy (a search frame is about 256 KiB); small
/// enough that a client that never reads holds little (one more frame per search in flight,
/// and the responses of requests already read, may wait for room beyond it).
pub const OUTBOX_BYTES_MAX: usize = 4 << 20;

/// A frame queued with the room it takes until written.
struct Queued {
    frame: Bytes,
    room: OwnedSemaphorePermit,
}

/// The room a frame takes: its size, at most all of it (a frame larger than the bound waits
/// for an empty queue).
fn room_for(frame: &Bytes) -> u32 {
    frame.len().clamp(1, OUTBOX_BYTES_MAX) as u32
}

/// Where a connection's responses go.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Queued>,
    /// Free bytes of the queue, one permit per byte (fair: waiters are served in order).
    room: Arc<Semaphore>,
    runtime: tokio::runtime::Handle,
    /// The connection's search slots (a search holds one while it runs on the blocking pool).
    pub searches: Arc<Semaphore>,
}

impl Outbox {
    /// An outbox and the task that writes what it queues to `stream`. The task ends once every
    /// clone of the outbox is gone and the queue is written out, or when the client is gone.
    /// A client that takes no bytes for `write_timeout` while a frame waits is given up.
    pub fn start<W>(
        stream: W,
        searches_max: usize,
        write_timeout: Duration,
    ) -> (Outbox, tokio::task::JoinHandle<()>)
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_frames(stream, rx, write_timeout));
        let outbox = Outbox {
            tx,
            room: Arc::new(Semaphore::new(OUTBOX_BYTES_MAX)),
            runtime: tokio::runtime::Handle::current(),
            searches: Arc::new(Semaphore::new(searches_max)),
        };
        (outbox, writer)
    }

    /// The error a client gets for a response that could not be encoded.
    pub fn encoding_error(e: FrameError) -> ErrorReply {
        ErrorReply::new(Status::Internal, format!("encoding the response: {e}"))
    }

    pub fn frame(id: u64, epoch: Epoch, response: Response) -> Bytes {
        let frame = ResponseFrame {
            id,
            epoch,
            response,
        };
        encode_response(&frame).unwrap_or_else(|e| {
            encode_response(&ResponseFrame {
                id,
                epoch,
                response: Response::Error(Outbox::encoding_error(e)),
            })
            .expect("an error response always encodes")
        })
    }

    /// Queues a response without ever blocking the caller (the chain loop must not wait for
    /// a slow client). A response that finds no room waits for it in a task, keeping its
    /// request's in-flight `permit` until queued; the reader does not read more meanwhile
    /// ([`Outbox::wait_for_room`]).
    pub fn send_nowait(
        &self,
        id: u64,
        epoch: Epoch,
        response: Response,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        self.send_all_nowait(vec![Self::frame(id, epoch, response)], permit);
    }

    /// Queues frames in order without blocking: those that find no room are sent, still in
    /// order, by a task that waits for it.
    pub fn send_all_nowait(&self, frames: Vec<Bytes>, permit: Option<OwnedSemaphorePermit>) {
        let mut frames = frames.into_iter();
        while let Some(frame) = frames.next() {
            let room = match self.room.clone().try_acquire_many_owned(room_for(&frame)) {
                Ok(room) => room,
                Err(_no_room) => {
                    let outbox = self.clone();
                    self.runtime.spawn(async move {
                        for frame in std::iter::once(frame).chain(frames) {
                            if outbox.queue(frame).await.is_err() {
                                break;
                            }
                        }
                        drop(permit);
                    });
                    return;
                }
            };
            if self.tx.send(Queued { frame, room }).is_err() {
                return; // the connection is gone
            }
        }
    }

    /// Queues a frame once there is room for it; `Err` once the connection is gone.
    async fn queue(&self, frame: Bytes) -> Result<(), ()> {
        let room = self
            .room
            .clone()
            .acquire_many_owned(room_for(&frame))
            .await
            .expect("never closed");
        self.tx.send(Queued { frame, room }).map_err(drop)
    }

    /// Whether the writer has given up (the client is gone, or took nothing for too long).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Waits until the queue has room, behind every response already waiting for it. The
    /// connection's reader calls it before reading a request, so a client that does not read
    /// its answers stops being read.
    pub async fn wait_for_room(&self) {
        drop(self.room.acquire().await.expect("never closed"));
    }

    /// One of the connection's slots for searches on the blocking pool, waiting while all are
    /// taken (which stops the connection's reader: see `connection::SEARCHES_IN_FLIGHT_MAX`).
    pub async fn search_slot(&self) -> OwnedSemaphorePermit {
        self.searches
            .clone()
            .acquire_owned()
            .await
            .expect("never closed")
    }

    /// Queues a response from a blocking thread, waiting while the client is slow to read
    /// (searches stream this way, so a slow reader slows its own search, nobody else).
    /// Fails when the client is gone.
    pub fn send_blocking(&self, id: u64, epoch: Epoch, response: Response) -> Result<(), ()> {
        self.send_frame_blocking(Self::frame(id, epoch, response))
    }

    /// Queues an encoded frame, waiting while the queue is full; `Err` once the connection is
    /// gone. Only off the runtime's threads (a search on the blocking pool).
    pub fn send_frame_blocking(&self, frame: Bytes) -> Result<(), ()> {
        if self.tx.is_closed() {
            return Err(()); // do not wait for room a gone client will never make
        }
        self.runtime.block_on(self.queue(frame))
    }
}

/// The right to answer one request. Answering releases the connection's in-flight slot.
pub struct Replier {
    pub id: u64,
    pub outbox: Outbox,
    pub permit: OwnedSemaphorePermit,
    /// What the request was and when its frame arrived, for the metrics.
    pub metered: (&'static str, Instant, Meter),
}

impl Replier {
    pub fn send(self, epoch: Epoch, response: Response) {
        let (operation, started, meter) = &self.metered;
        meter.request(operation, &response, *started);
        self.outbox
            .send_nowait(self.id, epoch, response, Some(self.permit));
    }

    /// Answers with `error`.
    pub fn fail(self, epoch: Epoch, error: ErrorReply) {
        self.send(epoch, Response::Error(error));
    }
}

/// Writes what is queued, every frame that is ready before one flush; a frame's room is freed
/// once it is flushed to the socket. Gives up on a client that takes nothing for `timeout`
/// (a search waiting for room would otherwise hold its thread for ever).
async fn write_frames<W>(stream: W, mut rx: mpsc::UnboundedReceiver<Queued>, timeout: Duration)
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut sink = FramedWrite::new(stream, codec());
    let mut written = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(Queued { frame, room }) = next {
            // `feed` writes out what it buffered once past its boundary, so it too may wait.
            if !matches!(
                tokio::time::timeout(timeout, sink.feed(frame)).await,
                Ok(Ok(()))
            ) {
                return give_up(timeout);
            }
            written.push(room);
            next = rx.try_recv().ok();
        }
        let flushed = tokio::time::timeout(timeout, SinkExt::<Bytes>::flush(&mut sink)).await;
        if !matches!(flushed, Ok(Ok(()))) {
            return give_up(timeout);
        }
        written.clear();
    }
}

fn give_up(timeout: Duration) {
    tracing::debug!(
        ?timeout,
        "closing a connection: its client stopped taking responses"
    );
}
