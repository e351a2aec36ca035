//! Exactly-once, in-order delivery of chain messages between two servers.
//!
//! Chains rely on FIFO links as HyperDex's did: two updates of one key that travel the same
//! chain reach every hop in version order because each link keeps its order. TCP gives that
//! within one connection; this layer keeps it across reconnections and against anything a
//! simulated network does. Each message gets a sequence number per link; the receiver delivers
//! them in order, buffers early ones and drops repeats; cumulative acknowledgements let the
//! sender forget what arrived and retransmit what did not (on a tick).

use std::collections::BTreeMap;

use crate::message::PeerMessage;

/// Ticks an unacknowledged message waits before it is sent again.
pub const RETRANSMIT_TICKS: u64 = 5;

/// Most messages held out of order on one link before the receiver stops buffering (they will
/// come again: the sender retransmits what is not acknowledged).
pub const REORDER_BUFFER_MAX: usize = 4096;

#[derive(Default, Debug)]
pub struct Link {
    /// The peer's incarnation as last seen (0: never heard from it).
    pub peer_incarnation: u64,
    next_seq: u64,
    /// Sent, not yet acknowledged: seq -> (message, tick it was last sent).
    unacked: BTreeMap<u64, (PeerMessage, u64)>,
    /// Every message up to this number has been delivered.
    delivered: u64,
    early: BTreeMap<u64, PeerMessage>,
    /// An acknowledgement is owed to the peer.
    pub ack_owed: bool,
}

impl Link {
    /// Numbers `message` for sending at `tick`; returns its sequence number.
    pub fn send(&mut self, message: PeerMessage, tick: u64) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.unacked.insert(seq, (message, tick));
        seq
    }

    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The peer acknowledged everything up to `ack`.
    pub fn on_ack(&mut self, ack: u64) {
        self.unacked = self.unacked.split_off(&(ack + 1));
    }

    /// A message numbered `seq` arrived; returns the messages now deliverable, in order.
    pub fn on_message(&mut self, seq: u64, message: PeerMessage) -> Vec<PeerMessage> {
        if seq == 0 {
            return Vec::new(); // data messages are numbered from 1 (check_envelope refuses 0)
        }
        self.ack_owed = true;
        if seq <= self.delivered || self.early.contains_key(&seq) {
            return Vec::new(); // a repeat
        }
        if seq != self.delivered + 1 && self.early.len() >= REORDER_BUFFER_MAX {
            return Vec::new(); // retransmitted later
        }
        self.early.insert(seq, message);
        let mut ready = Vec::new();
        while let Some(m) = self.early.remove(&(self.delivered + 1)) {
            self.delivered += 1;
            ready.push(m);
        }
        ready
    }

    /// Messages sent at or before `tick - RETRANSMIT_TICKS` and still unacknowledged, marked
    /// as sent again at `tick`.
    pub fn due(&mut self, tick: u64) -> Vec<(u64, PeerMessage)> {
        let mut due = Vec::new();
        for (&seq, (message, sent)) in self.unacked.iter_mut() {
            if *sent + RETRANSMIT_TICKS <= tick {
                *sent = tick;
                due.push((seq, message.clone()));
            }
        }
        due
    }

    /// The peer restarted: what it had received is gone. Our unacknowledged messages are
    /// numbered again from 1 and returned for resending; its numbering starts afresh too.
    pub fn reset(&mut self, peer_incarnation: u64, tick: u64) -> Vec<(u64, PeerMessage)> {
        self.peer_incarnation = peer_incarnation;
        self.delivered = 0;
        self.early.clear();
        let pending: Vec<PeerMessage> = std::mem::take(&mut self.unacked)
            .into_values()
            .map(|(m, _)| m)
            .collect();
        self.next_seq = 0;
        pending
            .into_iter()
            .map(|m| (self.send(m.clone(), tick), m))
            .collect()
    }

    pub fn unacked_len(&self) -> usize {
        self.unacked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ChainAck;
    use proptest::prelude::*;
    use tessera_types::{Epoch, Value, Version};

    fn msg(n: u64) -> PeerMessage {
        PeerMessage::Ack(ChainAck {
            space: 1,
            epoch: Epoch(1),
            key: Value::Int(n as i64),
            version: Version(n),
            subspace: tessera_types::SubspaceId(0),
            region: tessera_geometry::RegionIndex(0),
        })
    }

    proptest! {
        /// Whatever order and repetition the network delivers in, the receiver hands over each
        /// message once, in sending order.
        #[test]
        fn exactly_once_in_order(n in 1u64..40, deliveries in prop::collection::vec(0usize..1000, 0..200)) {
            let mut sender = Link::default();
            let sent: Vec<(u64, PeerMessage)> = (1..=n).map(|i| (sender.send(msg(i), 0), msg(i))).collect();
            let mut receiver = Link::default();
            let mut got = Vec::new();
            for d in deliveries {
                let (seq, m) = &sent[d % sent.len()];
                got.extend(receiver.on_message(*seq, m.clone()));
            }
            // Then everything once more, as retransmission would.
            for (seq, m) in &sent {
                got.extend(receiver.on_message(*seq, m.clone()));
            }
            let expected: Vec<PeerMessage> = sent.iter().map(|(_, m)| m.clone()).collect();
            prop_assert_eq!(got, expected);
            sender.on_ack(receiver.delivered());
            prop_assert_eq!(sender.unacked_len(), 0);
        }
    }

    #[test]
    fn retransmits_only_what_is_unacknowledged_and_due() {
        let mut l = Link::default();
        for i in 1..=3 {
            l.send(msg(i), 0);
        }
        l.on_ack(1);
        assert!(l.due(RETRANSMIT_TICKS - 1).is_empty());
        let due: Vec<u64> = l
            .due(RETRANSMIT_TICKS)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(due, vec![2, 3]);
        assert!(
            l.due(RETRANSMIT_TICKS + 1).is_empty(),
            "sent again at the previous tick"
        );
        let renumbered: Vec<u64> = l.reset(7, 9).into_iter().map(|(s, _)| s).collect();
        assert_eq!(renumbered, vec![1, 2]);
        assert_eq!(l.peer_incarnation, 7);
    }
}
