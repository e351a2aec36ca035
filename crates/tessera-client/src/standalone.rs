//! Standalone mode: one server (`tessera dev`) that owns every region and plans searches
//! itself, over a pool of connections ([`crate::pool`]). Every request goes to it as it is.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tessera_protocol::{Configuration, Request, Response, Status};
use tessera_types::Epoch;
use tokio::sync::mpsc;

use crate::connection::Connection;
use crate::error::{unexpected, ClientError};
use crate::pool::Pool;

/// The first pause before a request refused because the configuration changed under it is
/// sent again (doubling up to [`STALE_PAUSE_MAX`], until the request's deadline): while a
/// subspace is being built the server installs configurations in quick succession.
const STALE_PAUSE_FIRST: Duration = Duration::from_millis(5);
const STALE_PAUSE_MAX: Duration = Duration::from_millis(200);

pub(crate) struct Standalone {
    connections: Pool,
    config: RwLock<Arc<Configuration>>,
    /// Every request's deadline.
    timeout: Duration,
}

impl Standalone {
    /// Takes over a connection to the server at `address` (opening more as requests need,
    /// as `dialer` says) and fetches its configuration.
    pub(crate) async fn start(
        (address, connection): (&str, Arc<Connection>),
        dialer: tessera_protocol::handshake::Dialer,
        timeout: Duration,
    ) -> Result<Standalone, ClientError> {
        let config = fetch(&connection).await?;
        Ok(Standalone {
            connections: Pool::new(address, dialer, Some(connection)),
            config: RwLock::new(config),
            timeout,
        })
    }

    /// Every request's deadline.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn configuration(&self) -> Arc<Configuration> {
        self.config.read().expect("config lock").clone()
    }

    pub(crate) async fn refresh(&self) -> Result<Arc<Configuration>, ClientError> {
        let fresh = fetch(&*self.connections.connection().await?).await?;
        let mut slot = self.config.write().expect("config lock");
        if fresh.epoch >= slot.epoch {
            *slot = fresh;
        }
        Ok(slot.clone())
    }

    /// Sends a request, refreshing the configuration and retrying (after a short pause)
    /// when the server refuses it with `StaleEpoch` — it was built on an older configuration,
    /// or a read overlapped an install; either way it was not applied — until the deadline;
    /// refreshes after any answer that shows a newer epoch. An error answer becomes `Err`.
    /// Past the deadline the request fails with `Timeout` (a write may then have been applied),
    /// or with the last `StaleEpoch` refusal.
    pub(crate) async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut pause = STALE_PAUSE_FIRST;
        loop {
            let epoch = self.configuration().epoch;
            let connection = self.connections.connection().await?;
            let call = connection.call_with_epoch(request.clone(), epoch);
            let Ok(answer) = tokio::time::timeout_at(deadline, call).await else {
                let message = format!(
                    "no answer within {:?}: a write may or may not have been applied",
                    self.timeout
                );
                return Err(ClientError::Server {
                    status: Status::Timeout,
                    message,
                });
            };
            let (response, server_epoch) = answer?;
            if server_epoch > epoch {
                self.refresh().await?;
            }
            match response {
                Response::Error(e)
                    if e.status == Status::StaleEpoch
                        && tokio::time::Instant::now() + pause < deadline =>
                {
                    self.refresh().await?;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(STALE_PAUSE_MAX);
                }
                Response::Error(e) => return Err(ClientError::from(e)),
                other => return Ok(other),
            }
        }
    }

    /// Sends a request answered by a stream of frames (a search).
    pub(crate) async fn stream(
        &self,
        request: Request,
    ) -> Result<mpsc::UnboundedReceiver<Result<(Response, Epoch), ClientError>>, ClientError> {
        let epoch = self.configuration().epoch;
        self.connections
            .connection()
            .await?
            .stream(request, epoch)
            .await
    }
}

async fn fetch(connection: &Connection) -> Result<Arc<Configuration>, ClientError> {
    match connection.call(Request::GetConfig, Epoch(0)).await? {
        Response::Config(c) => Ok(Arc::from(c)),
        other => Err(unexpected(other)),
    }
}
