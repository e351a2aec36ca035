//! Messages between replicas: sending on the FIFO links (at once, or once this round's writes
//! are durable), and receiving envelopes, their order and their epochs.

use tessera_types::ServerId;

use super::io::CommittedReader;
use super::Replica;
use crate::check::{check_contents, check_shape};
use crate::message::{Envelope, PeerMessage};

impl Replica {
    /// Sends `message` to `to`: an update or a chunk at once (a forward, see
    /// [`Outputs::forwards`]), an acknowledgement once this round's writes are durable.
    pub(super) fn send(&mut self, to: ServerId, message: PeerMessage) {
        if to == self.me {
            self.local.push_back(message);
            return;
        }
        if matches!(message, PeerMessage::Ack(_)) {
            self.acks.push((to, message));
            return;
        }
        let link = self.links.entry(to).or_default();
        let (seq, to_incarnation) = (link.send(message.clone(), self.tick), link.peer_incarnation);
        let envelope = self.envelope(seq, to_incarnation, Some(message));
        self.outputs.forwards.push((to, envelope));
    }

    /// Sends again a message numbered `seq` (a retransmission): after this round's writes, as
    /// it may be an acknowledgement.
    pub(super) fn push_envelope(
        &mut self,
        to: ServerId,
        seq: u64,
        to_incarnation: u64,
        body: Option<PeerMessage>,
    ) {
        let envelope = self.envelope(seq, to_incarnation, body);
        self.outputs.messages.push((to, envelope));
    }

    /// An envelope from this server (its `ack` is filled in by [`Replica::take_outputs`]).
    pub(super) fn envelope(
        &self,
        seq: u64,
        to_incarnation: u64,
        body: Option<PeerMessage>,
    ) -> Envelope {
        Envelope {
            from: self.me,
            incarnation: self.incarnation,
            to_incarnation,
            seq,
            ack: 0,
            body,
        }
    }

    pub(super) fn on_envelope(&mut self, e: Envelope, store: &impl CommittedReader) {
        if e.from == self.me || (e.seq == 0) != e.body.is_none() {
            tracing::warn!(from = %e.from, seq = e.seq, "dropped a malformed envelope");
            return;
        }
        if self.config.server(e.from).is_none() {
            tracing::debug!(from = %e.from, "dropped an envelope from a server not in the configuration");
            return;
        }
        if e.to_incarnation != 0 && e.to_incarnation != self.incarnation {
            // Meant for this server's previous life; answering tells the sender who we are now.
            self.links.entry(e.from).or_default().ack_owed = true;
            return;
        }
        let tick = self.tick;
        let link = self.links.entry(e.from).or_default();
        if e.incarnation < link.peer_incarnation {
            return; // from the sender's previous life
        }
        if e.incarnation > link.peer_incarnation {
            if link.peer_incarnation == 0 {
                link.peer_incarnation = e.incarnation;
            } else {
                let resend = link.reset(e.incarnation, tick);
                for (seq, m) in resend {
                    self.push_envelope(e.from, seq, e.incarnation, Some(m));
                }
            }
        }
        let link = self.links.get_mut(&e.from).expect("created above");
        link.on_ack(e.ack);
        if let Some(body) = e.body {
            for m in link.on_message(e.seq, body) {
                self.deliver(e.from, m, store);
            }
        }
    }

    pub(super) fn deliver(&mut self, from: ServerId, m: PeerMessage, store: &impl CommittedReader) {
        let epoch = m.epoch();
        if epoch > self.epoch() {
            self.future.push((from, m));
            return;
        }
        // One built on an older configuration is still good where this server holds the
        // region it names: chains only lose servers, so what it says still holds. A message
        // between two hops of this server was made here; one from a peer is checked before it
        // is touched (the hop it names is checked against the chain by `on_chain`/`on_ack`).
        let checked = if from == self.me {
            Ok(())
        } else {
            check_shape(&m).and_then(|()| check_contents(&m, &self.config))
        };
        if let Err(e) = checked {
            tracing::warn!(error = %e, "dropped a chain message that does not fit the configuration");
            return;
        }
        let hop = match &m {
            PeerMessage::Chain(u) => Some((u.space, (u.subspace, u.region))),
            PeerMessage::Ack(a) => Some((a.space, (a.subspace, a.region))),
            PeerMessage::Transfer(_) => None,
        };
        if let Some(hop) = hop {
            if self.held_since.get(&hop).is_none_or(|&since| epoch < since) {
                tracing::debug!(%from, %epoch, "dropped a chain message built before this server held its region");
                return;
            }
        }
        match m {
            PeerMessage::Chain(u) => self.on_chain(from, u, store),
            PeerMessage::Ack(a) => self.on_ack(from, a, store),
            PeerMessage::Transfer(c) => self.on_transfer(from, c, store),
        }
    }
}
