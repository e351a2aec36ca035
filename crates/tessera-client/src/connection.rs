//! One TCP connection with any number of requests in flight.
//!
//! A writer task sends encoded frames, flushing once per burst; a reader task matches each
//! response to its request by id. A request waits on a oneshot channel; a search on an
//! unbounded channel that receives every frame of its stream.
//!
//! A failed call says whether its request may have reached the server ([`CallError::Lost`]) or
//! certainly did not ([`CallError::Unsent`]): a cluster client resends only what is safe to.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tessera_protocol::handshake::{Dialer, HandshakeError};
use tessera_protocol::{
    codec, decode_response, encode_request, FrameError, Request, RequestFrame, Response, Status,
};
use tessera_types::Epoch;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::error::ClientError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const OUTBOX_FRAMES: usize = 1024;

enum Waiter {
    One(oneshot::Sender<Result<(Response, Epoch), ClientError>>),
    Stream(mpsc::UnboundedSender<Result<(Response, Epoch), ClientError>>),
}

/// Why a call got no answer.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The request never left this client (the connection was already closed, or the request
    /// could not be encoded): the server did not see it.
    Unsent(ClientError),
    /// The connection failed after the request was queued: the server may have applied it.
    Lost(ClientError),
}

impl CallError {
    pub(crate) fn into_error(self) -> ClientError {
        match self {
            CallError::Unsent(e) | CallError::Lost(e) => e,
        }
    }
}

impl From<CallError> for ClientError {
    fn from(e: CallError) -> ClientError {
        e.into_error()
    }
}

impl Waiter {
    /// Hands `answer` to whoever waits (nobody, if the caller stopped waiting).
    fn deliver(self, answer: Result<(Response, Epoch), ClientError>) {
        match self {
            Waiter::One(tx) => {
                let _ = tx.send(answer);
            }
            Waiter::Stream(tx) => {
                let _ = tx.send(answer);
            }
        }
    }
}

struct Waiters {
    by_id: HashMap<u64, Waiter>,
    /// Set once the connection is gone: later requests fail at once.
    closed: bool,
    /// Since when nothing has been in flight (`None` while something is).
    idle_since: Option<Instant>,
}

impl Waiters {
    fn new() -> Waiters {
        Waiters {
            by_id: HashMap::new(),
            closed: false,
            idle_since: Some(Instant::now()),
        }
    }

    fn insert(&mut self, id: u64, waiter: Waiter) {
        self.by_id.insert(id, waiter);
        self.idle_since = None;
    }

    fn remove(&mut self, id: u64) -> Option<Waiter> {
        let waiter = self.by_id.remove(&id);
        if self.by_id.is_empty() && self.idle_since.is_none() {
            self.idle_since = Some(Instant::now());
        }
        waiter
    }

    /// Closes, answering every request in flight with `response` (see `read_frames`).
    fn answer_all(&mut self, response: Response, epoch: Epoch) {
        self.close_with(|| Ok((response.clone(), epoch)));
        self.idle_since = Some(Instant::now());
    }

    fn fail_all(&mut self, make: impl Fn() -> ClientError) {
        self.close_with(|| Err(make()));
    }

    /// Closes, handing every request in flight what `answer` makes.
    fn close_with(&mut self, answer: impl Fn() -> Result<(Response, Epoch), ClientError>) {
        self.closed = true;
        for (_, w) in self.by_id.drain() {
            w.deliver(answer());
        }
    }
}

pub(crate) struct Connection {
    outbox: mpsc::Sender<Bytes>,
    waiters: Arc<Mutex<Waiters>>,
    next_id: AtomicU64,
}

impl Connection {
    /// Connects to `address`, authenticating as `dialer` says (a token, or the cluster
    /// secret) before the connection's reader and writer start.
    pub(crate) async fn open(address: &str, dialer: &Dialer) -> Result<Connection, ClientError> {
        let framed = dialer
            .connect(address, codec(), CONNECT_TIMEOUT)
            .await
            .map_err(|e| match e {
                HandshakeError::Refused(e) => e.into(),
                HandshakeError::Io(e) => ClientError::Io(e),
                e @ HandshakeError::Tls { .. } => ClientError::Tls(e.to_string()),
                HandshakeError::Closed => ClientError::ConnectionClosed,
                e => ClientError::Protocol(e.to_string()),
            })?;
        // The daemon answered the handshake and sends nothing more until asked.
        let parts = framed.into_parts();
        if !parts.read_buf.is_empty() {
            return Err(ClientError::Protocol(
                "the daemon sent more than its answers to the handshake".into(),
            ));
        }
        let stream = parts.io;
        let (read_half, write_half) = stream.into_split();
        let waiters = Arc::new(Mutex::new(Waiters::new()));
        let (outbox, rx) = mpsc::channel(OUTBOX_FRAMES);
        tokio::spawn(write_frames(write_half, rx, waiters.clone()));
        tokio::spawn(read_frames(read_half, waiters.clone()));
        Ok(Connection {
            outbox,
            waiters,
            next_id: AtomicU64::new(1),
        })
    }

    /// Whether the connection has failed or closed: every later request would fail at once.
    pub(crate) fn is_closed(&self) -> bool {
        self.waiters.lock().expect("waiters lock").closed
    }

    /// Requests sent and not fully answered yet (a search until its last frame).
    pub(crate) fn in_flight(&self) -> usize {
        self.waiters.lock().expect("waiters lock").by_id.len()
    }

    /// Since when nothing has been in flight, `None` while something is.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        self.waiters.lock().expect("waiters lock").idle_since
    }

    /// Queues a request. An error means it was not sent.
    async fn send(
        &self,
        request: Request,
        epoch: Epoch,
        waiter: Waiter,
    ) -> Result<(), ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = encode_request(&RequestFrame { id, epoch, request }).map_err(|e| match e {
            FrameError::TooLarge(_) => ClientError::Server {
                status: Status::TooLarge,
                message: e.to_string(),
            },
            other => ClientError::Protocol(other.to_string()),
        })?;
        {
            let mut waiters = self.waiters.lock().expect("waiters lock");
            if waiters.closed {
                return Err(ClientError::ConnectionClosed);
            }
            waiters.insert(id, waiter);
        }
        if self.outbox.send(bytes).await.is_err() {
            // The writer task is gone: the frame was never written.
            self.waiters.lock().expect("waiters lock").remove(id);
            return Err(ClientError::ConnectionClosed);
        }
        Ok(())
    }

    /// Sends a request; returns its response and the epoch the server answered in, or says
    /// whether the request may have reached the server.
    pub(crate) async fn try_call(
        &self,
        request: Request,
        epoch: Epoch,
    ) -> Result<(Response, Epoch), CallError> {
        let (tx, rx) = oneshot::channel();
        self.send(request, epoch, Waiter::One(tx))
            .await
            .map_err(CallError::Unsent)?;
        match rx.await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(CallError::Lost(e)),
            Err(_) => Err(CallError::Lost(ClientError::ConnectionClosed)),
        }
    }

    /// Sends a request; returns its response and the epoch the server answered in.
    pub(crate) async fn call_with_epoch(
        &self,
        request: Request,
        epoch: Epoch,
    ) -> Result<(Response, Epoch), ClientError> {
        Ok(self.try_call(request, epoch).await?)
    }

    pub(crate) async fn call(
        &self,
        request: Request,
        epoch: Epoch,
    ) -> Result<Response, ClientError> {
        Ok(self.call_with_epoch(request, epoch).await?.0)
    }

    /// Sends a request answered by a stream of frames (a search): each frame's response and
    /// the epoch the server answered in. An error means the request was not sent.
    pub(crate) async fn stream(
        &self,
        request: Request,
        epoch: Epoch,
    ) -> Result<mpsc::UnboundedReceiver<Result<(Response, Epoch), ClientError>>, ClientError> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.send(request, epoch, Waiter::Stream(tx)).await?;
        Ok(rx)
    }
}

async fn write_frames(
    stream: tessera_protocol::tls::WriteHalf,
    mut rx: mpsc::Receiver<Bytes>,
    waiters: Arc<Mutex<Waiters>>,
) {
    let mut sink = FramedWrite::new(stream, codec());
    while let Some(frame) = rx.recv().await {
        let mut ok = sink.feed(frame).await.is_ok();
        while ok {
            match rx.try_recv() {
                Ok(frame) => ok = sink.feed(frame).await.is_ok(),
                Err(_) => break,
            }
        }
        if !ok || SinkExt::<Bytes>::flush(&mut sink).await.is_err() {
            waiters
                .lock()
                .expect("waiters lock")
                .fail_all(|| ClientError::ConnectionClosed);
            return;
        }
    }
}

async fn read_frames(stream: tessera_protocol::tls::ReadHalf, waiters: Arc<Mutex<Waiters>>) {
    let mut frames = FramedRead::new(stream, codec());
    while let Some(frame) = frames.next().await {
        let body = match frame {
            Ok(body) => body,
            Err(e) => {
                // Reset, or a frame over the limit: the connection is lost.
                let (kind, message) = (e.kind(), e.to_string());
                let lost = || ClientError::Io(std::io::Error::new(kind, message.clone()));
                waiters.lock().expect("waiters lock").fail_all(lost);
                return;
            }
        };
        let frame = match decode_response(&body) {
            Ok(frame) => frame,
            Err(e) => {
                let message = e.to_string();
                waiters
                    .lock()
                    .expect("waiters lock")
                    .fail_all(|| ClientError::Protocol(message.clone()));
                return;
            }
        };
        let mut w = waiters.lock().expect("waiters lock");
        if frame.id == 0 {
            // About the connection, not one request: the server is closing it. A stopping
            // server says `Unavailable` once it has answered everything it read: what is
            // unanswered was not run, and gets that refusal as its answer (retried like any).
            match frame.response {
                Response::Error(e) if e.status == Status::Unavailable => {
                    w.answer_all(Response::Error(e), frame.epoch)
                }
                Response::Error(e) => w.fail_all(|| ClientError::from(e.clone())),
                _ => {}
            }
            continue;
        }
        if let Response::SearchItems(_) = &frame.response {
            // One frame of a stream: the stream stays open until its last frame.
            if let Some(Waiter::Stream(tx)) = w.by_id.get(&frame.id) {
                let _ = tx.send(Ok((frame.response, frame.epoch)));
            }
            continue;
        }
        let waiter = w.remove(frame.id);
        drop(w);
        // None: the caller stopped waiting.
        if let Some(waiter) = waiter {
            waiter.deliver(Ok((frame.response, frame.epoch)));
        }
    }
    waiters
        .lock()
        .expect("waiters lock")
        .fail_all(|| ClientError::ConnectionClosed);
}
