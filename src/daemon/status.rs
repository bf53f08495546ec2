//! What the daemon reports: the status line (`status`, `watch`), systemd's STATUS=,
//! supervisor lines, and the reactions to a change of role, leader, term or health.

use super::*;

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
    pub(super) fn report_changes(&mut self) {
        let st = self.node.status(boot_now());
        let view = View {
            role: st.role,
            leader: st.leader,
            term: st.term,
            lease_until: st.lease_until,
            health: self.verdict(),
            drained: self.node.drained(),
        };
        if view == self.view {
            return;
        }
        let changed = (view.role, view.leader, view.term, view.health, view.drained)
            != (
                self.view.role,
                self.view.leader,
                self.view.term,
                self.view.health,
                self.view.drained,
            );
        if view.role != self.view.role {
            self.hooks
                .transition(view.role, view.leader, view.term, view.health.name());
        }
        if view.role != self.view.role || view.leader != self.view.leader {
            self.metrics.role_changes += 1;
            let leader = view.leader.map_or("none".to_string(), |l| {
                format!("{l} ({})", self.cfg.name_of(l))
            });
            info!(
                "role {}, term {}, leader {leader}",
                view.role.name(),
                view.term
            );
        }
        self.view = view;
        let line = self.status_line();
        self.control.broadcast(Scope::Group(0), &line);
        let (fields, until) = self.supervisor_fields();
        self.control.push_supervisors(0, &fields, until);
        if changed {
            self.notifier.send(&self.status_text());
        }
    }

    /// The members of a supervisor line (without `n`, added per connection) and the
    /// lease end when this server leads. Durations in ns so `run` can check its options
    /// exactly; `lease_until_ns` and `now_ns` on CLOCK_BOOTTIME.
    pub(super) fn supervisor_fields(&self) -> (String, Option<u64>) {
        let now = boot_now();
        let st = self.node.status(now);
        let until = st.lease_until.map(Time::as_nanos);
        let fields = format!(
            "\"id\":{},\"role\":\"{}\",\"leader\":{},\"term\":{},\"lease_until_ns\":{},\"now_ns\":{},\"lease_len_ns\":{},\"heartbeat_ns\":{},\"rtt_ns\":{},\"resigning\":{}",
            self.cfg.id,
            st.role.name(),
            st.leader.map_or("null".into(), |l| l.to_string()),
            st.term,
            until.map_or("null".into(), |u| u.to_string()),
            now.as_nanos(),
            crate::time::duration_nanos(self.node.lease_len()),
            crate::time::duration_nanos(self.node.heartbeat()),
            crate::time::duration_nanos(self.cfg.rtt),
            self.node.resign_pending()
        );
        (fields, until)
    }

    /// The STATUS= line for systemd: role, leader and term.
    pub(super) fn status_text(&self) -> String {
        let v = self.view;
        let mut s = match (v.role, v.leader) {
            (Role::Leader, _) => format!("STATUS=leader, term {}", v.term),
            (Role::Follower, Some(l)) => format!(
                "STATUS=follower, leader {l} ({}), term {}",
                self.cfg.name_of(l),
                v.term
            ),
            (Role::Follower, None) => format!("STATUS=follower, no leader, term {}", v.term),
        };
        if v.health != Verdict::Ok {
            s.push_str(&format!(", health {}", v.health.name()));
        }
        if v.drained {
            s.push_str(", drained");
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

    pub(super) fn status_line(&self) -> String {
        let now = boot_now();
        let st = self.node.status(now);
        let mut s = format!(
            "{{\"id\":{},\"name\":{},\"role\":\"{}\",\"leader\":{},\"term\":{},",
            self.cfg.id,
            json_str(&self.cfg.name_of(self.cfg.id)),
            st.role.name(),
            st.leader.map_or("null".into(), |l| l.to_string()),
            st.term
        );
        match st.lease_until {
            Some(u) => write!(
                s,
                "\"lease_ms\":{},\"lease_until_ns\":{},",
                u.saturating_since(now).as_millis(),
                u.as_nanos()
            ),
            None => write!(s, "\"lease_ms\":null,\"lease_until_ns\":null,"),
        }
        .expect("write to String");
        let (health, cause) = self.health();
        write!(
            s,
            "\"elector\":\"{}\",\"voted_term\":{},\"healthy\":{},\"drained\":{},\"health\":\"{}\",\"health_cause\":{},\"config_refused\":{},\"now_ns\":{},\"peers\":[",
            st.elector.name(),
            st.voted_term,
            self.node.healthy(),
            self.node.drained(),
            health.name(),
            cause.as_deref().map_or("null".into(), json_str),
            self.config_refused.as_deref().map_or("null".into(), json_str),
            now.as_nanos()
        )
        .expect("write to String");
        for (i, (id, heard)) in self.node.peers().enumerate() {
            let ago = heard.map_or("null".into(), |t| {
                now.saturating_since(t).as_millis().to_string()
            });
            let fit = self
                .node
                .peer_fit(now, id)
                .map_or("null".into(), |f| f.to_string());
            write!(
                s,
                "{}{{\"id\":{id},\"heard_ms_ago\":{ago},\"healthy\":{fit}}}",
                if i > 0 { "," } else { "" }
            )
            .expect("write to String");
        }
        s.push_str("]}\n");
        s
    }
}
