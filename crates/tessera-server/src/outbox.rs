//! A connection's responses: the queue to its writer task, and the right to answer one request.
//!
//! Whoever answers — the connection's own task, a search on the blocking pool, the chain loop —
//! encodes a response frame and queues it here; the connection's writer task writes every
//! frame that is ready and flushes once (write batching).

use std::sync::Arc;

use bytes::Bytes;
use futures::SinkExt;
use tessera_protocol::{
    codec, encode_response, ErrorReply, FrameError, Response, ResponseFrame, Status,
};
use tessera_types::Epoch;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::FramedWrite;

/// Encoded responses queued for one connection's writer task.
const OUTBOX_FRAMES: usize = 1024;

/// Where a connection's responses go.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Bytes>,
    runtime: tokio::runtime::Handle,
    /// The connection's search slots (a search or group operation holds one while it runs on
    /// the blocking pool).
    pub searches: Arc<Semaphore>,
}

impl Outbox {
    /// An outbox and the task that writes what it queues to `stream`. The task ends once every
    /// clone of the outbox is gone and the queue is written out, or when the client is gone.
    pub fn start(
        stream: tokio::net::tcp::OwnedWriteHalf,
        searches_max: usize,
    ) -> (Outbox, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(OUTBOX_FRAMES);
        let writer = tokio::spawn(write_frames(stream, rx));
        let outbox = Outbox {
            tx,
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
    /// a slow client). Memory stays bounded by the connection's in-flight limit: a response
    /// that waits for room keeps its request's in-flight `permit` until it is queued, so a
    /// client that does not read its answers stops being read.
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
            match self.tx.try_send(frame) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Closed(_)) => return,
                Err(mpsc::error::TrySendError::Full(first)) => {
                    let tx = self.tx.clone();
                    self.runtime.spawn(async move {
                        for frame in std::iter::once(first).chain(frames) {
                            if tx.send(frame).await.is_err() {
                                break;
                            }
                        }
                        drop(permit);
                    });
                    return;
                }
            }
        }
    }

    /// Queues a response from a blocking thread, waiting while the client is slow to read
    /// (searches stream this way, so a slow reader slows its own search, nobody else).
    /// Fails when the client is gone.
    /// One of the connection's slots for searches and group operations, waiting while all
    /// are taken (which stops the connection's reader: see `connection::SEARCHES_IN_FLIGHT_MAX`).
    pub async fn search_slot(&self) -> OwnedSemaphorePermit {
        self.searches
            .clone()
            .acquire_owned()
            .await
            .expect("never closed")
    }

    pub fn send_blocking(&self, id: u64, epoch: Epoch, response: Response) -> Result<(), ()> {
        self.send_frame_blocking(Self::frame(id, epoch, response))
    }

    /// Queues an encoded frame, waiting while the queue is full; `Err` once the connection is
    /// gone. Only off the runtime's threads (a search on the blocking pool).
    pub fn send_frame_blocking(&self, frame: Bytes) -> Result<(), ()> {
        self.tx.blocking_send(frame).map_err(|_| ())
    }
}

/// The right to answer one request. Answering releases the connection's in-flight slot.
pub struct Replier {
    pub id: u64,
    pub outbox: Outbox,
    pub permit: OwnedSemaphorePermit,
}

impl Replier {
    pub fn send(self, epoch: Epoch, response: Response) {
        self.outbox
            .send_nowait(self.id, epoch, response, Some(self.permit));
    }

    /// Answers with `error`.
    pub fn fail(self, epoch: Epoch, error: ErrorReply) {
        self.send(epoch, Response::Error(error));
    }
}

async fn write_frames(stream: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::Receiver<Bytes>) {
    let mut sink = FramedWrite::new(stream, codec());
    while let Some(frame) = rx.recv().await {
        if sink.feed(frame).await.is_err() {
            return;
        }
        while let Ok(frame) = rx.try_recv() {
            if sink.feed(frame).await.is_err() {
                return;
            }
        }
        if SinkExt::<Bytes>::flush(&mut sink).await.is_err() {
            return;
        }
    }
}
