//! What a node wants done, and write before send: the state to persist, the outputs
//! held until it is durable (`handle_persisted` releases them), events, messages.

use super::*;

/// An output waiting for a durable write.
#[derive(Clone, Debug)]
pub(super) enum Held {
    Send(Dest, Message),
    SelfVote(u64),
    /// A re-election to this term, applied once led_term = term is durable.
    Reelect(u64),
}

impl Node {
    /// Confirms that `state` is durable; releases the datagrams that waited for it.
    pub fn handle_persisted(&mut self, now: Time, state: Durable) {
        // Confirmations come in order; an older one must never lower what is durable.
        let d = self.durable;
        if state.term >= d.term && state.voted_term >= d.voted_term && state.led_term >= d.led_term
        {
            self.durable = state;
        }
        if self.requested == Some(state) {
            self.requested = None;
            self.write_holds = false;
        }
        self.apply_staged();
        self.release(now);
        self.check_invariants(now);
    }

    /// The next thing the driver must do, in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    pub(super) fn durable_view(&self) -> Durable {
        let mut d = Durable {
            term: self.term,
            voted_term: self.voted_term,
            voted_for: self.voted_for.map_or(0, |i| self.ids[i]),
            led_term: self.led_term,
            hold_ms: ms_ceil(self.promise),
            drained: self.drained,
        };
        if self.cfg.sabotage.forget_votes {
            d.term = self.durable.term;
            d.voted_term = self.durable.voted_term;
            d.voted_for = self.durable.voted_for;
        }
        if self.cfg.sabotage.volatile_led {
            d.led_term = self.durable.led_term;
        }
        d
    }

    /// Asks for the state to be written if it differs from what was last asked for.
    pub(super) fn persist(&mut self) {
        let want = self.durable_view();
        let base = self.requested.unwrap_or(self.durable);
        if want != base {
            // Only the drain changed: nothing that leaves waits for this write. Once a
            // write holds, datagrams wait for every write asked for until none is
            // pending (a later write may undo what the held ones reflect, so none may
            // leave before all are confirmed, as with any write).
            // Nor does a shorter hold: what leaves needs a hold at least as long on
            // disk, never a shorter one (a longer one there only makes a restart stay
            // quiet longer). What leaves with a longer hold than the disk's waits for
            // its write on its own (`update_promise`).
            let lowers_holds =
                self.cfg.sabotage.lowering_write_holds && want.hold_ms < base.hold_ms;
            self.write_holds |=
                changes_more_than_hold(&want, &base) || want.hold_ms > base.hold_ms || lowers_holds;
            self.ask_write(want);
        }
    }

    /// Records and emits a write of `want`, keeping the lowest hold that may still
    /// land (`min_hold_pending`).
    fn ask_write(&mut self, want: Durable) {
        self.pending_min_hold = if self.requested.is_some() {
            self.pending_min_hold.min(want.hold_ms)
        } else {
            self.durable.hold_ms.min(want.hold_ms)
        };
        self.requested = Some(want);
        self.out.push_back(Output::Persist(want));
    }

    /// The lowest hold, in ms, that the disk may hold once the writes now pending have
    /// landed or not: what is on disk, and every write asked for since none was
    /// pending (a write that lowers the hold holds nothing, and may land after a
    /// datagram that left). A datagram that reflects a longer hold waits
    /// (`update_promise`), and staged timers apply only once it covers them.
    pub(super) fn min_hold_pending(&self) -> u32 {
        if self.requested.is_some() && !self.cfg.sabotage.disk_hold_bound {
            self.pending_min_hold.min(self.durable.hold_ms)
        } else {
            self.durable.hold_ms
        }
    }

    /// Asks for a write of a hold promise grown ahead of any LEAD that carries it (a
    /// reload's staged timers, `Node::set_timers`): nothing that leaves reflects the
    /// longer hold before it is durable, so the growth alone holds no datagram. Any
    /// other change in the same write holds them as in `persist`.
    pub(super) fn persist_ahead(&mut self) {
        let want = self.durable_view();
        let base = self.requested.unwrap_or(self.durable);
        if want != base {
            self.write_holds |= changes_more_than_hold(&want, &base);
            self.ask_write(want);
        }
    }

    /// True while a write this node asked for holds its datagrams: one that changes
    /// what a datagram may reflect (SPEC section 4: the term, a vote, the term led, the
    /// hold promise). A write that only records a drain holds nothing: no datagram
    /// promises that a drain is durable, and the drain's answer waits for the write on
    /// its own (the daemon counts the writes done). Held behind it, the heartbeats of a
    /// drained leader whose disk stalled stopped, and its planned handover became a
    /// lapsed lease (tests/health_sim.rs,
    /// `a_stalled_disk_during_a_drain_still_hands_over_at_once`).
    pub(super) fn sends_wait(&self) -> bool {
        self.requested.is_some() && (self.write_holds || self.cfg.sabotage.drain_write_holds_sends)
    }

    pub(super) fn send(&mut self, dest: Dest, msg: Message) {
        if self.sends_wait() || !self.held.is_empty() {
            self.held.push_back(Held::Send(dest, msg));
        } else {
            self.emit_send(dest, msg);
        }
    }

    pub(super) fn emit_send(&mut self, dest: Dest, msg: Message) {
        self.check_durable_for(&msg);
        if let (Dest::One(c), Body::Vote { .. }) = (dest, msg.body) {
            self.push_event(Event::Voted {
                term: msg.term,
                candidate: c,
            });
        }
        self.out.push_back(Output::Send { dest, msg });
    }

    pub(super) fn push_event(&mut self, e: Event) {
        self.out.push_back(Output::Event(e));
    }

    pub(super) fn message(&self, term: u64, body: Body) -> Message {
        Message {
            sender: self.cfg.id,
            fingerprint: self.cfg.fingerprint,
            term,
            body,
        }
    }

    /// Emits held outputs, in order, while no write that holds them is outstanding.
    pub(super) fn release(&mut self, now: Time) {
        while !self.sends_wait() {
            let Some(h) = self.held.pop_front() else {
                break;
            };
            match h {
                Held::Send(dest, msg) => {
                    self.unfit_lead_leaves(now, &msg);
                    self.emit_send(dest, msg)
                }
                Held::SelfVote(term) => {
                    self.push_event(Event::Voted {
                        term,
                        candidate: self.cfg.id,
                    });
                    self.on_vote(now, self.me, term);
                }
                Held::Reelect(term) => self.apply_reelection(now, term),
            }
        }
    }

    /// The LEAD this leader sent on turning unfit waited for a write (a drain is
    /// persisted first) and leaves only now: its answers can take RTT from now, so the
    /// wait for them (`unfit_wait`) counts from now, not from the turn. Counted from
    /// the turn, a slow write left the preferred follower's answer outside the wait and
    /// a less preferred server was named successor (tests/health_sim.rs,
    /// `a_slow_drain_write_still_hands_over_to_the_preferred_server`).
    fn unfit_lead_leaves(&mut self, now: Time, msg: &Message) {
        if let Body::Lead { seq, .. } = msg.body
            && (msg.term, seq) == self.unfit_from
            && self.unfit_wait.is_some()
            && !self.cfg.sabotage.unfit_wait_from_turn
        {
            self.unfit_wait = Some(now + self.cfg.rtt);
        }
    }

    /// Forgets the heartbeats of `term` still waiting for a write: that leadership
    /// has ended, and a LEAD leaving later would promise a hold this server may no
    /// longer have on disk (the swarm found one after a reload shrank the promise).
    /// Not sending a LEAD is always safe.
    pub(super) fn drop_held_leads(&mut self, term: u64) {
        self.held.retain(|h| {
            !matches!(h, Held::Send(_, m) if m.term == term
                && matches!(m.body, Body::Lead { resign: false, .. }))
        });
    }
}

/// True when `want` differs from `base` in what a datagram may reflect besides the hold
/// (the term, a vote, the term led); the drain is reflected by none.
fn changes_more_than_hold(want: &Durable, base: &Durable) -> bool {
    Durable {
        drained: base.drained,
        hold_ms: base.hold_ms,
        ..*want
    } != *base
}
