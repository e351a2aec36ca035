//! A client's connections to one address: as many as its requests in flight need.
//!
//! One connection carries any number of requests, but one task reads (and decodes) every
//! answer it brings, and the server writes them all through one writer: with many requests in
//! flight, a single connection is the bottleneck of the client and of the server. So a request
//! takes the open connection with the fewest requests in flight, and when even that one has
//! [`GROW_AT`] or more, and fewer than [`CONNECTIONS_MAX`] are open or being opened, the
//! request opens another and goes on it. A connection beyond the first that has had nothing in
//! flight for [`IDLE`] is let go, and a failed one is dropped the next time a request comes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_protocol::handshake::Dialer;

use crate::connection::Connection;
use crate::error::ClientError;

/// Requests in flight on the least busy connection that make a request open another. High:
/// while one server core is the limit, a second connection costs it more than it saves the
/// client (16 tasks searching one `tessera dev`: 12-19 % less throughput and 14-24 % more
/// server CPU per search with a new connection per 4 in flight; docs/benchmarks.md).
pub(crate) const GROW_AT: usize = 32;

/// Connections to one address at most.
pub(crate) const CONNECTIONS_MAX: usize = 4;

/// How long a connection beyond the first may stay unused before it is let go.
pub(crate) const IDLE: Duration = Duration::from_secs(30);

pub(crate) struct Pool {
    address: String,
    dialer: Dialer,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    open: Vec<Arc<Connection>>,
    /// Connections being opened by requests that found every open one busy.
    opening: usize,
}

impl Pool {
    /// A pool for `address`, starting with `first` if given (the connection a client opened
    /// to find out what the daemon is).
    pub(crate) fn new(address: &str, dialer: Dialer, first: Option<Arc<Connection>>) -> Pool {
        Pool {
            address: address.to_owned(),
            dialer,
            state: Mutex::new(State {
                open: first.into_iter().collect(),
                opening: 0,
            }),
        }
    }

    /// The connection a request should go on: the least busy one, or a new one (see the
    /// module's documentation). Fails only when no connection is open and none can be opened.
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>, ClientError> {
        let least_busy = {
            let mut state = self.state.lock().expect("pool lock");
            state.let_go(Instant::now());
            let least_busy = state
                .open
                .iter()
                .map(|c| (c.in_flight(), c))
                .min_by_key(|(in_flight, _)| *in_flight)
                .map(|(in_flight, c)| (in_flight, c.clone()));
            let full = state.open.len() + state.opening >= CONNECTIONS_MAX;
            match least_busy {
                Some((in_flight, c)) if in_flight < GROW_AT || full => return Ok(c),
                Some(_) | None => {}
            }
            state.opening += 1;
            least_busy.map(|(_, c)| c)
        };
        let opened = Connection::open(&self.address, &self.dialer).await;
        let mut state = self.state.lock().expect("pool lock");
        state.opening -= 1;
        match opened {
            Ok(fresh) => {
                let fresh = Arc::new(fresh);
                state.open.push(fresh.clone());
                Ok(fresh)
            }
            // Busy is better than nothing.
            Err(e) => least_busy.filter(|c| !c.is_closed()).ok_or(e),
        }
    }

    /// Connections open now (for tests and metrics).
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.state.lock().expect("pool lock").open.len()
    }
}

impl State {
    /// Drops failed connections, and those beyond the first unused for [`IDLE`].
    fn let_go(&mut self, now: Instant) {
        self.open.retain(|c| !c.is_closed());
        let mut index = 0;
        self.open.retain(|c| {
            index += 1;
            index == 1 || c.idle_since().is_none_or(|t| now.duration_since(t) < IDLE)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{SinkExt, StreamExt};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tessera_protocol::ResponseFrame;
    use tessera_protocol::{codec, decode_request, encode_response, Request, Response};
    use tessera_types::Epoch;
    use tokio::net::TcpListener;
    use tokio::sync::watch;
    use tokio_util::codec::Framed;

    /// A server that counts its connections and answers every request with `Count(its id)`,
    /// but only once `release` says so.
    async fn holding_server() -> (String, Arc<AtomicUsize>, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (release, released) = watch::channel(false);
        let counter = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                counter.fetch_add(1, Ordering::SeqCst);
                let (mut sink, mut frames) = Framed::new(tcp, codec()).split();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let mut released = released.clone();
                tokio::spawn(async move {
                    while let Some(Ok(body)) = frames.next().await {
                        let id = decode_request(&body).unwrap().id;
                        released.wait_for(|r| *r).await.unwrap();
                        tx.send(id).unwrap();
                    }
                });
                tokio::spawn(async move {
                    while let Some(id) = rx.recv().await {
                        let response = Response::Count(id);
                        let frame = ResponseFrame {
                            id,
                            epoch: Epoch(0),
                            response,
                        };
                        sink.send(encode_response(&frame).unwrap()).await.unwrap();
                    }
                });
            }
        });
        (address, accepted, release)
    }

    /// Waits until `n` requests are in flight over the pool's connections.
    async fn until_in_flight(pool: &Pool, n: usize) {
        let in_flight = || -> usize {
            let state = pool.state.lock().unwrap();
            state.open.iter().map(|c| c.in_flight()).sum()
        };
        while in_flight() < n {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_pool_grows_with_requests_in_flight_up_to_its_bound_and_lets_idle_ones_go() {
        let (address, accepted, release) = holding_server().await;
        let pool = Arc::new(Pool::new(&address, Dialer::default(), None));
        let mut calls = tokio::task::JoinSet::new();
        let send = |pool: Arc<Pool>| async move {
            let connection = pool.connection().await.unwrap();
            connection.call(Request::GetConfig, Epoch(0)).await
        };
        // One at a time: each request is in flight before the next picks its connection.
        for n in 1..=3 * GROW_AT {
            calls.spawn(send(pool.clone()));
            until_in_flight(&pool, n).await;
        }
        // GROW_AT on the first; then each further request found the least busy connection
        // below GROW_AT only once the others were full: 3 connections for 3 * GROW_AT.
        assert_eq!(pool.open(), 3);
        for _ in 0..CONNECTIONS_MAX * GROW_AT * 2 {
            calls.spawn(send(pool.clone()));
        }
        until_in_flight(&pool, (3 + CONNECTIONS_MAX * 2) * GROW_AT).await;
        assert_eq!(pool.open(), CONNECTIONS_MAX);
        assert_eq!(accepted.load(Ordering::SeqCst), CONNECTIONS_MAX);
        release.send(true).unwrap();
        let mut answered = 0;
        while let Some(result) = calls.join_next().await {
            assert!(matches!(result.unwrap(), Ok(Response::Count(_))));
            answered += 1;
        }
        assert_eq!(answered, (3 + CONNECTIONS_MAX * 2) * GROW_AT);
        // Every connection is idle now: all but the first go once IDLE has passed.
        let mut state = pool.state.lock().unwrap();
        state.let_go(Instant::now());
        assert_eq!(state.open.len(), CONNECTIONS_MAX);
        state.let_go(Instant::now() + IDLE + Duration::from_secs(1));
        assert_eq!(state.open.len(), 1);
    }
}
