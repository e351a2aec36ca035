//! What a daemon's listener does before a connection's requests are served, the same for
//! servers and coordinators: at most [`ConnectionLimits::connections_max`] connections at once
//! (one more is told so and closed), accept failures backed off and logged once, and frames
//! read under a timeout ([`next_frame`]), so that no client holds a daemon's memory, threads
//! or file descriptors for ever.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::FramedRead;

use crate::frame::tell_and_close;
use crate::status::{ErrorReply, Status};

/// Limits on client connections, so that no client holds the server's resources for ever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A frame that has begun must arrive whole within this, or the connection is closed (a
    /// half-sent frame holds its buffer; a peer that stops mid-frame is gone or hostile).
    pub frame_timeout: Duration,
    /// A connection with nothing in progress that sends nothing for this long is closed.
    /// `None`: idle connections stay open (clients keep pooled connections between bursts).
    pub idle_timeout: Option<Duration>,
    /// Connections open at once, counted until a connection proves the cluster secret (a
    /// member's connections do not count). One more is answered with `Unavailable` and closed,
    /// rather than left to hang once the process runs out of file descriptors.
    pub connections_max: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            frame_timeout: Duration::from_secs(30),
            idle_timeout: None,
            // Below the usual soft limit of 1 024 file descriptors a process gets, leaving room
            // for the store's files, peers and the listener.
            connections_max: 768,
        }
    }
}

/// File descriptors kept for everything but client connections: the store's files, peer
/// links, the listener, the runtime.
const DESCRIPTORS_RESERVED: usize = 128;

impl ConnectionLimits {
    /// These limits, with the connection cap lowered to fit the process's soft limit on open
    /// file descriptors (less [`DESCRIPTORS_RESERVED`]): past the cap a client is told so, but
    /// past the descriptor limit `accept` fails and a client would wait unanswered.
    pub fn fit_to_descriptors(self, descriptors: Option<usize>) -> ConnectionLimits {
        let Some(fit) = descriptors.map(|d| d.saturating_sub(DESCRIPTORS_RESERVED).max(1)) else {
            return self;
        };
        if fit >= self.connections_max {
            return self;
        }
        tracing::warn!(
            asked = self.connections_max,
            serving = fit,
            descriptors = descriptors.unwrap_or(0),
            "fewer connections than asked: the process may open too few files (raise `ulimit -n`)"
        );
        ConnectionLimits {
            connections_max: fit,
            ..self
        }
    }
}

/// The soft limit on this process's open file descriptors, from `/proc/self/limits` (Linux);
/// `None` where it cannot be read or is unlimited.
pub fn descriptor_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Waits after a failed `accept` (out of file descriptors, typically) start here and double up to
/// [`ACCEPT_BACKOFF_MAX`], rather than spinning or logging every retry.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A connection's place under the cap: held while it is open, let go once it proves the
/// cluster secret (members' connections are not capped).
pub type Slot = OwnedSemaphorePermit;

/// A listener that admits at most `limits.connections_max` connections at once.
pub struct Listener {
    tcp: TcpListener,
    slots: Arc<Semaphore>,
    connections_max: usize,
    backoff: Duration,
    failures: u64,
}

impl Listener {
    pub fn new(tcp: TcpListener, limits: &ConnectionLimits) -> Listener {
        Listener {
            tcp,
            slots: Arc::new(Semaphore::new(limits.connections_max)),
            connections_max: limits.connections_max,
            backoff: ACCEPT_BACKOFF_MIN,
            failures: 0,
        }
    }

    /// Connections holding a slot.
    pub fn open(&self) -> usize {
        self.connections_max - self.slots.available_permits()
    }

    /// The next connection with a slot. One over the cap is told so and closed in the
    /// background; a failed accept is retried with backoff, said once per run of failures.
    pub async fn accept(&mut self) -> (TcpStream, SocketAddr, Slot) {
        loop {
            match self.tcp.accept().await {
                Ok((tcp, peer)) => {
                    if self.failures > 0 {
                        tracing::warn!(failures = self.failures, "accepting connections again");
                        (self.failures, self.backoff) = (0, ACCEPT_BACKOFF_MIN);
                    }
                    match self.slots.clone().try_acquire_owned() {
                        Ok(slot) => return (tcp, peer, slot),
                        Err(_) => {
                            tracing::debug!(%peer, "connection refused: too many open");
                            let max = self.connections_max;
                            let error = ErrorReply::new(
                                Status::Unavailable,
                                format!(
                                    "too many connections: this daemon serves at most {max} at \
                                     once; retry later"
                                ),
                            );
                            tokio::spawn(tell_and_close(tcp, error));
                        }
                    }
                }
                Err(e) => {
                    if self.failures == 0 {
                        tracing::warn!(error = %e, open = self.open(), "accept failed; retrying with backoff");
                    }
                    self.failures += 1;
                    tokio::time::sleep(self.backoff).await;
                    self.backoff = (self.backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            }
        }
    }
}

/// Sets up an accepted connection: no Nagle delay, then TLS if the listener serves it (within
/// `timeout`). `None`: the connection is gone (a plain client on a TLS port was told why).
pub async fn open_socket(
    tcp: TcpStream,
    tls: Option<&crate::tls::ServerTls>,
    timeout: Duration,
) -> Option<crate::tls::Socket> {
    let _ = tcp.set_nodelay(true);
    let Some(tls) = tls else {
        return Some(crate::tls::Socket::Plain(tcp));
    };
    match tls.accept(tcp, timeout).await {
        Ok(socket) => Some(socket),
        Err(e) => {
            tracing::debug!(error = %e, "connection closed before TLS was set up");
            None
        }
    }
}

/// Why [`next_frame`] gave up on a connection (it logs the timeouts).
pub enum Stop {
    /// The client closed the connection, or it failed.
    Closed,
    /// A frame begun did not arrive whole within the frame timeout.
    HalfSentFrame,
    /// Nothing in progress and nothing received for the idle timeout.
    Idle,
}

/// The next frame, or why the connection is to be closed. `idle` says whether the connection
/// has nothing in progress. A frame begun must be whole within `limits.frame_timeout` (checked
/// every half of it: a frame still partial at two checks in a row has taken at least half of it
/// and at most all of it); an idle connection is closed after `limits.idle_timeout`.
pub async fn next_frame<S>(
    frames: &mut FramedRead<S, tokio_util::codec::LengthDelimitedCodec>,
    limits: &ConnectionLimits,
    idle: impl Fn() -> bool,
) -> Result<Result<bytes::BytesMut, std::io::Error>, Stop>
where
    S: tokio::io::AsyncRead + Unpin,
{
    let tick = (limits.frame_timeout / 2).max(Duration::from_millis(5));
    let (mut partial_ticks, mut idle_for) = (0u32, Duration::ZERO);
    loop {
        // `next` on a FramedRead is cancel-safe: a partial frame stays in its buffer.
        match tokio::time::timeout(tick, frames.next()).await {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => return Err(Stop::Closed),
            Err(_elapsed) => {
                if !frames.read_buffer().is_empty() {
                    partial_ticks += 1;
                    if partial_ticks >= 2 {
                        tracing::debug!(
                            "closing a connection: a frame begun did not arrive in time"
                        );
                        return Err(Stop::HalfSentFrame);
                    }
                } else if idle() {
                    idle_for += tick;
                    if limits.idle_timeout.is_some_and(|t| idle_for >= t) {
                        tracing::debug!("closing an idle connection");
                        return Err(Stop::Idle);
                    }
                } else {
                    idle_for = Duration::ZERO;
                }
            }
        }
    }
}
