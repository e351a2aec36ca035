//! Registering shapes of documents with the coordinators, off the chain loop's thread.
//!
//! A write that would store a document of a shape its dynamic space has not registered is
//! held by the chain loop (`tessera_replication::Outputs::unknown_shapes`). A standalone server
//! registers the shape itself; a cluster server asks the coordinators
//! (`SpaceChange::AddShape`), who answer `Done` once every live server acts on the
//! configuration that has it, then to mark it ready (`SpaceChange::ShapeReady`, which they
//! apply only if every live server still does). The point leader orders the write once its
//! configuration has the shape ready: so every server that can answer a search knows the shape
//! before any document of it is acknowledged, and tells a client that planned without it to
//! plan again (`SpaceConfig::shapes_since_matter`).

use std::time::{Duration, Instant};

use tessera_protocol::{ErrorReply, Request, Response, SpaceChange, Status};
use tessera_types::Shape;

use crate::coordination::{ask_coordinators, Coordinators};
use crate::queue::{ChainSender, LoopInput};

/// How long a registration is retried while no coordinator accepts it (no leader, servers
/// catching up). The write it holds is answered `Unavailable` (not applied) past it.
const REGISTER_PATIENCE: Duration = Duration::from_secs(15);

/// A cluster server's way to the coordinators for shapes.
pub struct ShapeRegistrar {
    coordinators: Coordinators,
    runtime: tokio::runtime::Handle,
    chain: ChainSender,
}

impl ShapeRegistrar {
    pub fn new(
        coordinators: Coordinators,
        runtime: tokio::runtime::Handle,
        chain: ChainSender,
    ) -> ShapeRegistrar {
        ShapeRegistrar {
            coordinators,
            runtime,
            chain,
        }
    }

    /// Asks the coordinators to register `shape` in `space`; the chain loop gets the outcome
    /// as [`LoopInput::ShapeRegistered`]. Never blocks.
    pub fn register(&self, space: String, shape: Shape) {
        let coordinators = self.coordinators.clone();
        let chain = self.chain.clone();
        self.runtime.spawn(async move {
            let result = register(&coordinators, &space, &shape).await;
            if let Err(e) = &result {
                tracing::warn!(space, %shape, error = %e, "a shape of document was not registered");
            }
            let _ = chain
                .send(LoopInput::ShapeRegistered {
                    space,
                    shape,
                    result,
                })
                .await;
        });
    }
}

/// Registers `shape`, then marks it ready (each answered once every live server acts on it).
async fn register(
    coordinators: &Coordinators,
    space: &str,
    shape: &Shape,
) -> Result<(), ErrorReply> {
    let deadline = Instant::now() + REGISTER_PATIENCE;
    for change in [
        SpaceChange::AddShape(shape.clone()),
        SpaceChange::ShapeReady(shape.clone()),
    ] {
        let request = Request::AlterSpace {
            space: space.to_owned(),
            change,
            fence: None,
        };
        loop {
            let last = match ask_coordinators(coordinators, request.clone()).await {
                Ok(Response::Done) => break,
                // Made, but some server did not report the epoch in time: not safe yet.
                Ok(Response::Error(e)) if e.status == Status::Timeout => e.message,
                Ok(Response::Error(e)) if !e.status.is_retryable() => return Err(refusal(e)),
                Ok(other) => format!("{other:?}"),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(ErrorReply::new(
                    Status::Unavailable,
                    format!("the document's shape could not be registered with the coordinators ({last}); the write was not applied, retry"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// A coordinator's refusal as the writer sees it: a space that may keep no more shapes
/// refuses the document for its size, as a typed space refuses an object over its limit.
fn refusal(e: ErrorReply) -> ErrorReply {
    match e.status {
        Status::BadAlteration => ErrorReply::new(Status::TooLarge, e.message),
        _ => e,
    }
}
