//! What the binary's drivers share (adaptation, key splits, re-cuts): each runs in every
//! coordinator process and in a standalone `tessera dev`, acts only where `leads` says so (the
//! coordinators' Raft leader), and is a client of the database, connecting when it first acts.

use std::time::Duration;

use tessera_client::{Client, ClientOptions};

/// A tick every `period`, a missed one delayed rather than bunched.
pub fn ticks(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// A driver's client: connected on first use, and again after a failed attempt.
pub struct DriverClient {
    /// Whose client it is, for the log.
    driver: &'static str,
    addr: String,
    connect: ClientOptions,
    client: Option<Client>,
}

impl DriverClient {
    pub fn new(driver: &'static str, (addr, connect): (String, ClientOptions)) -> DriverClient {
        DriverClient {
            driver,
            addr,
            connect,
            client: None,
        }
    }

    /// The client, connecting now if it has not yet; `None` (logged) if it cannot yet.
    pub async fn get(&mut self) -> Option<&Client> {
        if self.client.is_none() {
            match Client::connect_with(&self.addr, self.connect.clone()).await {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    tracing::info!(driver = self.driver, addr = %self.addr, error = %e, "cannot connect yet");
                    return None;
                }
            }
        }
        self.client.as_ref()
    }
}
