//! Standalone mode: one connection to one server (`tessera dev`) that owns every region and
//! plans searches itself. Every request goes to it as it is.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tessera_protocol::{Configuration, Request, Response, Status};
use tessera_types::Epoch;
use tokio::sync::mpsc;

use crate::connection::Connection;
use crate::{unexpected, ClientError};

/// Times a request is sent again after the configuration changed under it.
const STALE_RETRIES_MAX: usize = 3;

pub(crate) struct Standalone {
    connection: Arc<Connection>,
    config: RwLock<Arc<Configuration>>,
    /// Every request's deadline.
    timeout: Duration,
}

impl Standalone {
    /// Takes over a connection to a server and fetches its configuration.
    pub(crate) async fn start(
        connection: Arc<Connection>,
        timeout: Duration,
    ) -> Result<Standalone, ClientError> {
        let config = fetch(&connection).await?;
        Ok(Standalone {
            connection,
            config: RwLock::new(config),
            timeout,
        })
    }

    pub(crate) fn configuration(&self) -> Arc<Configuration> {
        self.config.read().expect("config lock").clone()
    }

    pub(crate) async fn refresh(&self) -> Result<Arc<Configuration>, ClientError> {
        let fresh = fetch(&self.connection).await?;
        let mut slot = self.config.write().expect("config lock");
        if fresh.epoch >= slot.epoch {
            *slot = fresh;
        }
        Ok(slot.clone())
    }

    /// Sends a request, refreshing the configuration and retrying when the server says it
    /// was built on an older one; refreshes after any answer that shows a newer epoch. An
    /// error answer becomes `Err`.
    /// Past the deadline the request fails with `Timeout` (a write may then have been applied).
    pub(crate) async fn call(&self, request: Request) -> Result<Response, ClientError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut attempt = 0;
        loop {
            let epoch = self.configuration().epoch;
            let call = self.connection.call_with_epoch(request.clone(), epoch);
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
                    if e.status == Status::StaleEpoch && attempt < STALE_RETRIES_MAX =>
                {
                    attempt += 1;
                    self.refresh().await?;
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
        self.connection.stream(request, epoch).await
    }
}

async fn fetch(connection: &Connection) -> Result<Arc<Configuration>, ClientError> {
    match connection.call(Request::GetConfig, Epoch(0)).await? {
        Response::Config(c) => Ok(Arc::from(c)),
        other => Err(unexpected(other)),
    }
}
