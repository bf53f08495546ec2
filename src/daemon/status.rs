//! What the daemon reports: the status line (`status`, `watch`), systemd's STATUS=,
//! supervisor lines, and the reactions to a change of role, leader, term or health.

use super::*;
use crate::json::Obj;

/// What applications see; a change is reported to watchers and logged.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct View {
    pub(super) role: Role,
    pub(super) leader: Option<u16>,
    pub(super) term: u64,
    /// The end of this server's lease: watchers see each renewal, so a process on this
    /// host knows exactly until when this server may act as leader.
    pub(super) lease_until: Option<Time>,
    /// `ok`, `failing` or `unknown` (SPEC section 13).
    pub(super) health: Verdict,
    /// `electctl drain`.
    pub(super) drained: bool,
}

impl Daemon {
    /// Reports every group's changes: hooks, logs, watchers, supervisors, STATUS=.
    pub(super) fn report_changes(&mut self, now: Time) {
        let mut notify = false;
        for g in 0..self.groups.len() {
            notify |= self.report_group(g, now);
        }
        // The all-groups watchers of a file with group lines (`watch` without a group)
        // hear every change of role, leader, term, health or drain of any group, but
        // not each lease renewal: that line holds every group (up to ~60 KiB with 64
        // groups of 255 servers), and renewals come several times a heartbeat.
        // `watch GROUP` reports renewals. Sent once per loop iteration
        // (`flush_control`), however many flushes changed something.
        if notify && self.cfg.has_groups() {
            self.all_dirty = true;
        }
        let notify = self.check_hearing(now) || notify;
        if notify {
            self.notifier.send(&self.status_text());
        }
    }

    /// Tells the all-groups watchers of the changes since the last call, then writes
    /// every client's queued answers.
    pub(super) fn flush_control(&mut self) {
        if std::mem::take(&mut self.all_dirty) && self.control.watches(Scope::All) {
            let line = self.all_status_line();
            self.control.broadcast(Scope::All, &line);
        }
        self.control.flush_now(self.poll.registry());
    }

    /// Group `g`'s view at `now`.
    fn view_of(&self, g: usize, now: Time) -> View {
        let node = &self.host.group(g).node;
        let st = node.status(now);
        View {
            role: st.role,
            leader: st.leader,
            term: st.term,
            lease_until: st.lease_until,
            health: self.host.verdict(g),
            drained: node.drained(),
        }
    }

    /// Reports group `g`'s change, if any; true when more than the lease changed.
    fn report_group(&mut self, g: usize, now: Time) -> bool {
        let view = self.view_of(g, now);
        self.note_leader(g, view.leader);
        let group = &mut self.groups[g];
        let old = group.view;
        if view == old {
            return false;
        }
        let major = (view.role, view.leader, view.term, view.health, view.drained)
            != (old.role, old.leader, old.term, old.health, old.drained);
        if view.role != old.role {
            group
                .hooks
                .transition(view.role, view.leader, view.term, view.health.name());
        }
        let changed = view.role != old.role || view.leader != old.leader;
        // A new term with the same leader (a re-election: the fencing token changed)
        // is logged too.
        if changed || view.term != old.term {
            if changed {
                group.metrics.role_changes += 1;
            }
            let leader = view.leader.map_or("none".to_string(), |l| {
                format!("{l} ({})", self.cfg.name_of(l))
            });
            // Read here only: at rest (a renewal) nothing is logged, and the
            // configuration's group line is not touched (issue 25).
            let several = self.cfg.has_groups();
            info!(
                "{}role {}, term {}, leader {leader}",
                group.tag(several),
                view.role.name(),
                view.term
            );
        }
        group.view = view;
        // Built only for those who listen: a leader of many groups flushes several
        // times a heartbeat, and each line costs O(groups x servers).
        if self.control.watches(Scope::Group(g)) {
            let line = self.status_line(g);
            self.control.broadcast(Scope::Group(g), &line);
        }
        major
    }

    /// The STATUS= line for systemd: role, leader and term (per group when several).
    pub(super) fn status_text(&self) -> String {
        let mut s = String::from("STATUS=");
        if self.groups.len() == 1 {
            s.push_str(&self.view_text(&self.groups[0].view));
        } else {
            // Bounded: 64 groups of at most ~60 characters each.
            let leads: Vec<&str> = self
                .groups
                .iter()
                .filter(|g| g.view.role == Role::Leader)
                .map(|g| g.name.as_str())
                .collect();
            let without: usize = self
                .groups
                .iter()
                .filter(|g| g.view.leader.is_none())
                .count();
            write!(
                s,
                "leader of {} of {} groups{}",
                leads.len(),
                self.groups.len(),
                if leads.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", one_line(&leads.join(", "), MAX_REFUSAL_STATUS))
                }
            )
            .expect("write to String");
            if without > 0 {
                write!(s, ", {without} without a known leader").expect("write to String");
            }
            let unhealthy = self
                .groups
                .iter()
                .filter(|g| g.view.health != Verdict::Ok)
                .count();
            if unhealthy > 0 {
                write!(s, ", {unhealthy} not healthy").expect("write to String");
            }
            let drained = self.groups.iter().filter(|g| g.view.drained).count();
            if drained > 0 {
                write!(s, ", {drained} drained").expect("write to String");
            }
        }
        if self.metrics.hears_nobody {
            s.push_str("; hears no other server");
        }
        if let Some(why) = &self.config_refused {
            // The operator must know the file on disk is not what runs.
            write!(
                s,
                "; reload refused: {}; running the previous configuration, a restart would load the refused file",
                one_line(why, MAX_REFUSAL_STATUS)
            )
            .expect("write to String");
        }
        s
    }

    /// "leader, term 7" or "follower, leader 2 (b1), term 7", with health and drain.
    fn view_text(&self, v: &View) -> String {
        let mut s = match (v.role, v.leader) {
            (Role::Leader, _) => format!("leader, term {}", v.term),
            (Role::Follower, Some(l)) => format!(
                "follower, leader {l} ({}), term {}",
                self.cfg.name_of(l),
                v.term
            ),
            (Role::Follower, None) => format!("follower, no leader, term {}", v.term),
        };
        if v.health != Verdict::Ok {
            s.push_str(&format!(", health {}", v.health.name()));
        }
        if v.drained {
            s.push_str(", drained");
        }
        s
    }

    /// Per peer, the latest time any group heard it.
    pub(super) fn peers_heard(&self) -> Vec<(u16, Option<Time>)> {
        let mut out: Vec<(u16, Option<Time>)> = self.host.group(0).node.peers().collect();
        for g in &self.host.groups()[1..] {
            for (o, (_, heard)) in out.iter_mut().zip(g.node.peers()) {
                o.1 = o.1.max(heard);
            }
        }
        out
    }

    /// Adds the members of group `g`'s status that are its own (role, term, lease,
    /// health...) to `o`.
    fn group_fields(&self, o: Obj, g: usize, now: Time) -> Obj {
        let group = &self.groups[g];
        let node = &self.host.group(g).node;
        let st = node.status(now);
        let o = o
            .str("group", &group.name)
            .str("role", st.role.name())
            .opt_num("leader", st.leader)
            .num("term", st.term);
        let o = match st.lease_until {
            Some(u) => o
                .num("lease_ms", u.saturating_since(now).as_millis())
                .num("lease_until_ns", u.as_nanos()),
            None => o.null("lease_ms").null("lease_until_ns"),
        };
        let (health, cause) = self.host.health(g);
        o.str("elector", st.elector.name())
            .num("voted_term", st.voted_term)
            .opt_str(
                "acks",
                st.acks_in_turn
                    .map(|some| if some { "in_turn" } else { "all" }),
            )
            .bool("healthy", node.healthy())
            .bool("drained", node.drained())
            .str("health", health.name())
            .opt_str("health_cause", cause.as_deref())
    }

    /// The `peers` array: when each peer was last heard (by any group) and, with `fit`
    /// from group `g`, whether it last reported itself fit to lead that group.
    fn peers_json(&self, fit: Option<usize>, now: Time) -> Vec<String> {
        let mut out = Vec::new();
        for (id, heard) in self.peers_heard() {
            let o = Obj::new().num("id", id).opt_num(
                "heard_ms_ago",
                heard.map(|t| now.saturating_since(t).as_millis()),
            );
            let o = match fit {
                Some(g) => o.opt_bool("healthy", self.host.group(g).node.peer_fit(now, id)),
                None => o,
            };
            out.push(o.finish());
        }
        out
    }

    /// The status line of group `g` (SPEC section 11): the shape a one-group daemon has
    /// always answered, with the group's name.
    pub(super) fn status_line(&self, g: usize) -> String {
        let now = boot_now();
        let o = Obj::new()
            .num("id", self.cfg.id)
            .str("name", &self.cfg.name_of(self.cfg.id));
        self.group_fields(o, g, now)
            .opt_str("config_refused", self.config_refused.as_deref())
            .num("now_ns", now.as_nanos())
            .arr("peers", self.peers_json(Some(g), now))
            .line()
    }

    /// The status of every group in one line (SPEC section 15: `status` and `watch`
    /// without a group when there are several): a `groups` array, each with its own
    /// role, term, lease, health and peers' fitness.
    pub(super) fn all_status_line(&self) -> String {
        let now = boot_now();
        let mut groups = Vec::new();
        for g in 0..self.groups.len() {
            // Each peer's fitness in this group, compactly: ids reported fit, ids
            // reported unfit (unknown: in neither), so 64 groups of 255 servers stay
            // within the control socket's answer bound.
            let node = &self.host.group(g).node;
            let (mut fit, mut unfit) = (Vec::new(), Vec::new());
            for (id, _) in node.peers() {
                match node.peer_fit(now, id) {
                    Some(true) => fit.push(id.to_string()),
                    Some(false) => unfit.push(id.to_string()),
                    None => {}
                }
            }
            let o = self.group_fields(Obj::new(), g, now);
            groups.push(o.arr("peers_fit", fit).arr("peers_unfit", unfit).finish());
        }
        Obj::new()
            .num("id", self.cfg.id)
            .str("name", &self.cfg.name_of(self.cfg.id))
            .arr("groups", groups)
            .opt_str("config_refused", self.config_refused.as_deref())
            .num("now_ns", now.as_nanos())
            .arr("peers", self.peers_json(None, now))
            .line()
    }
}
