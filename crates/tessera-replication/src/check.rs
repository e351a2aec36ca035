//! Checks on what other servers send: an envelope is data from a socket, never trusted.
//!
//! [`check_envelope`] is what the server runs on every envelope as it comes off a peer's
//! connection (a failure closes that connection); the state machine runs [`check_message`]
//! again when it delivers a message, against the configuration it then acts on. Nothing a peer
//! sends can make the state machine panic: every `expect` in `replica/` rests on these checks.

use tessera_geometry::{chain_for_update, region_of_object, RegionIndex, ReplicaMap};
use tessera_protocol::{Configuration, SpaceConfig};
use tessera_types::{Object, ServerId, SubspaceId, Version};

use crate::message::{ChainAck, ChainUpdate, Envelope, PeerMessage, TransferChunk};

/// Why an envelope or message was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    #[error("an envelope from this server to itself")]
    FromSelf,
    #[error("an envelope numbered {seq} with {} body", if *.has_body { "a" } else { "no" })]
    Numbering { seq: u64, has_body: bool },
    #[error("a chain update with neither an old nor a new object")]
    NoObject,
    #[error("a chain update whose old and new objects have different keys")]
    KeysDiffer,
    #[error("version 0 names no update")]
    VersionZero,
    #[error("an object without a key")]
    EmptyObject,
    #[error("space {0} is not in this configuration")]
    UnknownSpace(u64),
    #[error("an object that does not fit the schema of space {space:?}")]
    BadObject { space: String },
    #[error("region {region} of subspace {subspace} does not exist, is not on the update's chain or is not held here")]
    NotHeldHere { subspace: u16, region: u32 },
    #[error("a transfer entry with version 0, or outside region {region} of subspace {subspace}")]
    BadTransferEntry { subspace: u16, region: u32 },
    #[error("a transfer chunk whose range does not end exactly when it is the last")]
    BadTransferRange,
}

/// Checks an envelope as it comes off a peer's connection: its shape always, and when it was
/// built on `config`'s epoch, everything `config` can tell (space, objects against the schema,
/// the hop is this server's). A message of another epoch is checked against the configuration
/// the state machine acts on when it is delivered ([`check_message`]); a failure there drops
/// the message without blaming the link, since configurations move on.
pub fn check_envelope(
    envelope: &Envelope,
    me: ServerId,
    config: &Configuration,
) -> Result<(), EnvelopeError> {
    if envelope.from == me {
        return Err(EnvelopeError::FromSelf);
    }
    if (envelope.seq == 0) != envelope.body.is_none() {
        return Err(EnvelopeError::Numbering {
            seq: envelope.seq,
            has_body: envelope.body.is_some(),
        });
    }
    let Some(message) = &envelope.body else {
        return Ok(());
    };
    check_shape(message)?;
    if message.epoch() == config.epoch {
        check_message(message, me, config)?;
    }
    Ok(())
}

/// What every message must be, whatever the configuration: a version, objects with keys, an
/// update with an old or a new object of one key.
pub fn check_shape(message: &PeerMessage) -> Result<(), EnvelopeError> {
    match message {
        PeerMessage::Chain(u) => {
            if u.version == Version::NONE {
                return Err(EnvelopeError::VersionZero);
            }
            if u.old
                .iter()
                .chain(u.new.iter())
                .any(|o| o.values.is_empty())
            {
                return Err(EnvelopeError::EmptyObject);
            }
            match (&u.old, &u.new) {
                (None, None) => Err(EnvelopeError::NoObject),
                (Some(o), Some(n)) if o.key() != n.key() => Err(EnvelopeError::KeysDiffer),
                _ => Ok(()),
            }
        }
        PeerMessage::Ack(a) if a.version == Version::NONE => Err(EnvelopeError::VersionZero),
        PeerMessage::Ack(_) => Ok(()),
        PeerMessage::Transfer(c) => {
            if c.entries.iter().any(|e| e.object.values.is_empty()) {
                return Err(EnvelopeError::EmptyObject);
            }
            if c.entries.iter().any(|e| e.version == Version::NONE) {
                return Err(EnvelopeError::VersionZero);
            }
            if c.last != c.through.is_none() {
                return Err(EnvelopeError::BadTransferRange);
            }
            Ok(())
        }
    }
}

/// Checks a message of the right shape ([`check_shape`]) against `config`: its space exists,
/// its objects fit the schema, and this server is the hop it names (for an update: on the
/// update's chain; for an acknowledgement: a replica of the region).
pub fn check_message(
    message: &PeerMessage,
    me: ServerId,
    config: &Configuration,
) -> Result<(), EnvelopeError> {
    match message {
        PeerMessage::Chain(u) => check_update(u, me, config),
        PeerMessage::Ack(a) => check_ack(a, me, config),
        PeerMessage::Transfer(c) => check_chunk(c, config),
    }
}

/// The part of [`check_message`] the state machine needs before it touches a message from a
/// peer (it finds its own place on the chain itself): the space exists, the objects fit its
/// schema, an acknowledgement's key has the key's type.
pub fn check_contents(message: &PeerMessage, config: &Configuration) -> Result<(), EnvelopeError> {
    match message {
        PeerMessage::Chain(u) => update_space(u, config).map(|_| ()),
        PeerMessage::Ack(a) => ack_space(a, config).map(|_| ()),
        PeerMessage::Transfer(c) => check_chunk(c, config),
    }
}

/// A chunk's space exists, every entry fits its schema and lies in the chunk's region, every
/// key left out has the space's key type. Whether the chunk belongs to a transfer this server
/// takes part in is the state machine's question: transfers end and restart, so a stale chunk
/// is dropped, not blamed on the link. (Its range is storage's to check: `after` and
/// `through` are storage positions.)
fn check_chunk(c: &TransferChunk, config: &Configuration) -> Result<(), EnvelopeError> {
    let space = space(config, c.space)?;
    if c.left_out
        .iter()
        .any(|k| k.primitive_type() != Some(space.schema.key_type()))
    {
        return Err(EnvelopeError::BadObject {
            space: space.schema.name.clone(),
        });
    }
    let bad = EnvelopeError::BadTransferEntry {
        subspace: c.subspace.0,
        region: c.region.0,
    };
    let tessellations = space.tessellations();
    let Some(t) = tessellations
        .get(c.subspace.get())
        .filter(|t| c.region.0 < t.regions_count())
    else {
        return Err(bad);
    };
    for e in &c.entries {
        check_object(space, &e.object)?;
        // An object not placed in the subspace (a document outside its formula) has no
        // region there to be transferred with.
        let at = region_of_object(&space.schema, c.subspace, t, &e.object);
        if at != Some(c.region) {
            return Err(bad);
        }
    }
    Ok(())
}

fn update_space<'a>(
    u: &ChainUpdate,
    config: &'a Configuration,
) -> Result<&'a SpaceConfig, EnvelopeError> {
    let space = space(config, u.space)?;
    u.old
        .iter()
        .chain(u.new.iter())
        .try_for_each(|o| check_object(space, o))?;
    Ok(space)
}

fn ack_space<'a>(
    a: &ChainAck,
    config: &'a Configuration,
) -> Result<&'a SpaceConfig, EnvelopeError> {
    let space = space(config, a.space)?;
    if a.key.primitive_type() != Some(space.schema.key_type()) {
        return Err(EnvelopeError::BadObject {
            space: space.schema.name.clone(),
        });
    }
    Ok(space)
}

fn check_update(
    u: &ChainUpdate,
    me: ServerId,
    config: &Configuration,
) -> Result<(), EnvelopeError> {
    let space = update_space(u, config)?;
    let tessellations = space.tessellations();
    let not_held = EnvelopeError::NotHeldHere {
        subspace: u.subspace.0,
        region: u.region.0,
    };
    match tessellations.get(u.subspace.get()) {
        Some(t) if u.region.0 < t.regions_count() => {}
        _ => return Err(not_held),
    }
    let chain = chain_for_update(
        &space.schema,
        &tessellations,
        &Replicas(space),
        u.old.as_ref(),
        u.new.as_ref(),
    );
    if chain
        .iter()
        .any(|h| h.server == me && (h.subspace, h.region) == (u.subspace, u.region))
    {
        Ok(())
    } else {
        Err(not_held)
    }
}

fn check_ack(a: &ChainAck, me: ServerId, config: &Configuration) -> Result<(), EnvelopeError> {
    let space = ack_space(a, config)?;
    let not_held = EnvelopeError::NotHeldHere {
        subspace: a.subspace.0,
        region: a.region.0,
    };
    if space.holds(a.subspace, a.region, me) {
        Ok(())
    } else {
        Err(not_held)
    }
}

fn space(config: &Configuration, id: u64) -> Result<&SpaceConfig, EnvelopeError> {
    config
        .spaces
        .iter()
        .find(|s| s.id == id)
        .ok_or(EnvelopeError::UnknownSpace(id))
}

fn check_object(space: &SpaceConfig, o: &Object) -> Result<(), EnvelopeError> {
    if !o.conforms_to(&space.schema) || o.values.iter().any(|v| v.contains_nan()) {
        return Err(EnvelopeError::BadObject {
            space: space.schema.name.clone(),
        });
    }
    Ok(())
}

struct Replicas<'a>(&'a SpaceConfig);

impl ReplicaMap for Replicas<'_> {
    fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        self.0.replicas_of(subspace, region)
    }
}
