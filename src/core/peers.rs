//! What a server knows of each other server (raft-rs `Progress`): one struct per peer
//! instead of parallel vectors, so a new per-peer fact has one obvious room.

use crate::time::Time;

/// One other server, as this server sees it.
#[derive(Clone, Debug, Default)]
pub(super) struct Peer {
    /// When a datagram of it last arrived here (SPEC section 4).
    pub heard_at: Option<Time>,
    /// When the followed leader last said it had heard it (the `alive` map of a LEAD):
    /// followers acknowledge to the leader only, so a follower learns from the leader
    /// which other followers are alive.
    pub vouched_at: Option<Time>,
    /// When it last reported its fitness (an ACK, with or without UNFIT; an ELECT, with
    /// or without INELIGIBLE) (SPEC sections 13, 14).
    pub fit_at: Option<Time>,
    /// Since when it has been reported fit continuously (None after an unfit report).
    pub fit_since: Option<Time>,
    /// For a leader: the position (term, seq) of the LEAD acknowledged by its latest
    /// ACK that said fit ((0, 0) after an unfit one). A handover needs an ACK of a
    /// recent LEAD: a fit report dated by its receipt could be a late copy, or come from
    /// a server that crashed or froze since (issue 11 review).
    pub fit_ack: (u64, u64),
    /// The position of the newest current LEAD it acknowledged (fit or not).
    pub ack_pos: (u64, u64),
    /// Its latest report of how it is now, from a current ACK or LEAD: when, and
    /// whether it could take over. An ELECT's claim is not one: it says whether the
    /// claimant could be chosen in that round (not when it heard too few yet at a cold
    /// start, or had just resigned), and a healthy server looked "unfit" in `status`
    /// for K*HBT + HBT after every round (issue 23, item 9).
    pub report: Option<(Time, bool)>,
}
