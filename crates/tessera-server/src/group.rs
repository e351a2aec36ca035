//! A standalone server's group delete and group update, executed the way a cluster client
//! executes them (`tessera-client`'s `group_del`, `group_update`, `write_each`): find the
//! committed matches, then send one conditional write per match through the chain loop (the
//! predicates are its condition, so an object changed meanwhile is left alone), and count the
//! writes answered `Done`. A write refused with `NotFound` (deleted meanwhile), `CmpFail` (it
//! no longer matches, or the operation cannot apply to it) or `TooLarge` (the update would make
//! it too large) is skipped; any other error ends the operation with that error.
//!
//! It runs on the blocking pool. The matches come from one storage snapshot, so an object
//! that a write moves within the subspace being searched is never met twice; they go to the
//! chain loop [`CHUNK`] at a time, each chunk once the previous one is answered, so a group
//! operation holds at most that many keys and writes in memory however many objects match.

use std::ops::ControlFlow;

use tessera_protocol::{ErrorReply, Status, WriteMode};
use tessera_replication::KeyWrite;
use tessera_types::{CheckedFuncall, CheckedPredicate, Value};
use tokio::sync::oneshot;

use crate::queue::LoopInput;
use crate::reads::Scan;
use crate::state::Shared;
use crate::view::ServedSpace;

/// Writes of a group operation handed to the chain loop at once.
const CHUNK: usize = 1024;

/// What a group operation does to each match.
#[derive(Debug)]
pub enum GroupWrite {
    Del,
    Update(Vec<CheckedFuncall>),
}

/// Applies `write` to every committed object of `space` matching `predicates`; returns how
/// many were written.
pub fn run(
    shared: &Shared,
    space: &std::sync::Arc<ServedSpace>,
    predicates: &[CheckedPredicate],
    write: &GroupWrite,
) -> Result<u64, ErrorReply> {
    let mut keys = Vec::with_capacity(CHUNK);
    let mut written = 0;
    let mut failure = None;
    let scan = Scan::whole(space.clone(), predicates.to_vec());
    scan.decoded(&shared.store, |o| {
        let mut values = o.object.values;
        keys.push(values.swap_remove(0));
        if keys.len() == CHUNK {
            match write_each(shared, space, predicates, write, &mut keys) {
                Ok(n) => written += n,
                Err(e) => {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(written + write_each(shared, space, predicates, write, &mut keys)?)
}

/// Writes every key of `keys` (emptying it) through the chain loop and waits for the answers.
fn write_each(
    shared: &Shared,
    space: &std::sync::Arc<ServedSpace>,
    predicates: &[CheckedPredicate],
    write: &GroupWrite,
    keys: &mut Vec<Value>,
) -> Result<u64, ErrorReply> {
    if keys.is_empty() {
        return Ok(0);
    }
    let writes = keys
        .drain(..)
        .map(|key| match write {
            GroupWrite::Del => KeyWrite::Del {
                key,
                conditions: predicates.to_vec(),
            },
            GroupWrite::Update(funcalls) => KeyWrite::Put {
                key,
                mode: WriteMode::UpdateOnly,
                conditions: predicates.to_vec(),
                funcalls: funcalls.clone(),
            },
        })
        .collect();
    let (done, answers) = oneshot::channel();
    let stopped = || ErrorReply::new(Status::Unavailable, "the server is shutting down");
    shared
        .chain
        .blocking_send(LoopInput::Writes {
            space: space.clone(),
            writes,
            done,
        })
        .map_err(|_| stopped())?;
    let mut written = 0;
    for answer in answers.blocking_recv().map_err(|_| stopped())? {
        match answer {
            Ok(()) => written += 1,
            Err(e) if e.status.skipped_by_group_write() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}
