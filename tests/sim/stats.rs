//! What the adversaries did in a run (`Stats`), for the swarm's summary.

/// What the adversaries did in a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub late: u64,
    pub flushed: u64,
    pub aimed: u64,
    pub crashes_in_write: u64,
    pub reloads: u64,
    pub suspends: u64,
    pub planned_stops: u64,
    pub hung: u64,
    /// SIGTERMs (`Sim::stop`).
    pub stops: u64,
    /// Supervisors that lost their connections and reconnected.
    pub reconnects: u64,
    /// Confirmations sent twice or after an older one (`confirm_twice_pm`).
    pub confirmed_twice: u64,
    /// Health changes of a processor (issue 11).
    pub health_flips: u64,
    /// Health changes aimed at a lease end, a faith end or a timer deadline.
    pub health_aimed: u64,
    /// Moments at which every processor was unhealthy.
    pub all_unhealthy: u64,
    /// A healthy server cut off from all others.
    pub healthy_cut_off: u64,
    /// `drain` and `undrain` commands that reached a daemon.
    pub drains: u64,
    pub undrains: u64,
    /// `yield ID` commands that reached a leader.
    pub yields_to: u64,
    /// Handovers begun, by reason (`Handover as usize`: yield, health, drain, preempt).
    pub handovers: [u64; 4],
    /// LEADs caught by a per-link LEAD hold (issue 20).
    pub leads_held: u64,
    /// Supervisor stalls (issue 21).
    pub sup_stalls: u64,
    /// Issue 20's episodes: begun, with a second leader elected while the first sat,
    /// and with the first re-elected after that.
    pub lead_episodes: u64,
    pub concurrent: u64,
    pub reelected_after: u64,
    /// Re-elections of a leader while its lease was valid, under `floor_episode`.
    pub floors: u64,
    /// Datagrams sent by framing (issue 25): version 3/4, compact 5/6 (probe copies
    /// included), and of those the probes' compact copies; `heartbeat_framings`: those
    /// holding only LEADs and ACKs.
    pub framings: [u64; 4],
    pub heartbeat_framings: [u64; 4],
    pub probes: u64,
    /// Renewals that reached a supervisor through its stop timers (issue 25).
    pub timer_renewals: u64,
    /// Datagrams that reached a host while it led every group it runs, and those of all
    /// datagrams that waited for a wakeup (issue 25, reads at the heartbeat).
    pub leader_received: u64,
    pub deferred: u64,
    /// ACK entries sent; LEADs (not RESIGNs) sent, and of those the ones that asked
    /// only some followers to acknowledge them (issue 25, sparse acknowledgements).
    pub acks_sent: u64,
    pub leads_sent: u64,
    pub sparse_leads: u64,
    /// The ACK-loss adversary (`Sim::lose_acks`): episodes, the leader's LEADs while it
    /// ran and of those the sparse ones, bursts begun and of those the ones begun on a
    /// sparse LEAD, and the ACKs it lost or delivered late.
    pub ack_loss_episodes: u64,
    pub ack_loss_leads: u64,
    pub ack_loss_sparse_leads: u64,
    pub ack_loss_bursts: u64,
    pub ack_loss_sparse_bursts: u64,
    pub ack_loss_lost: u64,
    pub ack_loss_late: u64,
    /// Its reloads to a longer heartbeat while sparse (`AckLossPlan::reload`), and how
    /// many of the LEADs right after one asked only some followers.
    pub ack_loss_reloads: u64,
    pub ack_loss_reload_sparse: u64,
}

impl Stats {
    /// Adds another run's figures.
    pub fn add(&mut self, x: &Stats) {
        self.late += x.late;
        self.flushed += x.flushed;
        self.aimed += x.aimed;
        self.crashes_in_write += x.crashes_in_write;
        self.reloads += x.reloads;
        self.suspends += x.suspends;
        self.planned_stops += x.planned_stops;
        self.hung += x.hung;
        self.stops += x.stops;
        self.reconnects += x.reconnects;
        self.confirmed_twice += x.confirmed_twice;
        self.health_flips += x.health_flips;
        self.health_aimed += x.health_aimed;
        self.all_unhealthy += x.all_unhealthy;
        self.healthy_cut_off += x.healthy_cut_off;
        self.drains += x.drains;
        self.undrains += x.undrains;
        self.yields_to += x.yields_to;
        for (a, b) in self.handovers.iter_mut().zip(x.handovers) {
            *a += b;
        }
        self.leads_held += x.leads_held;
        self.sup_stalls += x.sup_stalls;
        self.lead_episodes += x.lead_episodes;
        self.concurrent += x.concurrent;
        self.reelected_after += x.reelected_after;
        self.floors += x.floors;
        for (a, b) in self.framings.iter_mut().zip(x.framings) {
            *a += b;
        }
        for (a, b) in self.heartbeat_framings.iter_mut().zip(x.heartbeat_framings) {
            *a += b;
        }
        self.probes += x.probes;
        self.timer_renewals += x.timer_renewals;
        self.leader_received += x.leader_received;
        self.deferred += x.deferred;
        self.acks_sent += x.acks_sent;
        self.leads_sent += x.leads_sent;
        self.sparse_leads += x.sparse_leads;
        self.ack_loss_episodes += x.ack_loss_episodes;
        self.ack_loss_leads += x.ack_loss_leads;
        self.ack_loss_sparse_leads += x.ack_loss_sparse_leads;
        self.ack_loss_bursts += x.ack_loss_bursts;
        self.ack_loss_sparse_bursts += x.ack_loss_sparse_bursts;
        self.ack_loss_lost += x.ack_loss_lost;
        self.ack_loss_late += x.ack_loss_late;
        self.ack_loss_reloads += x.ack_loss_reloads;
        self.ack_loss_reload_sparse += x.ack_loss_reload_sparse;
    }
}
