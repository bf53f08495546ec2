//! One election group as the daemon drives it (SPEC section 15): what
//! applications were last told, its hooks, its check, its handoff and its counters.
//! Its core and durable state are in the host (`crate::host::HostGroup`); everything
//! cluster-wide (sockets, state file I/O, timers) stays on the `Daemon`.

use super::*;

/// Counters of one group for `metrics` (labelled `group`), beyond its core's.
#[derive(Debug, Default)]
pub(super) struct GroupMetrics {
    pub(super) role_changes: u64,
    /// Planned handoffs begun.
    pub(super) handoffs: u64,
    /// Planned handoffs whose RESIGN waited for supervisors (not sent at once).
    pub(super) handoffs_waited: u64,
    /// How long the last handoff's RESIGN waited, in ms.
    pub(super) last_handoff_wait_ms: u64,
    /// Changes of leader, once each, by cause (`electd_leader_changes_total`).
    pub(super) leader_changes: super::metrics::LeaderChanges,
}

/// One election group's runtime.
pub(super) struct Group {
    /// Its name (ELECTD_GROUP, the `group` label, `status GROUP`).
    pub(super) name: String,
    /// What applications were last told.
    pub(super) view: View,
    pub(super) hooks: Hooks,
    pub(super) checks: Checks,
    pub(super) handoff: Option<Handoff>,
    /// The successor named by the latest handover begun (for the answer to `drain`).
    pub(super) last_handover_to: Option<u16>,
    pub(super) metrics: GroupMetrics,
}

impl Group {
    /// Builds group `g` of `cfg` from its state on disk (zero for a group never run):
    /// its runtime here and its core (for the host).
    pub(super) fn start(
        cfg: &Config,
        g: usize,
        durable: Durable,
        sabotage: &Sabotage,
        waker: &Arc<mio::Waker>,
        now: Time,
    ) -> Result<(Group, Node), Fatal> {
        let spec = &cfg.groups[g];
        let mut node_cfg = cfg.group_node_config(g, random_seed());
        node_cfg.sabotage = sabotage.clone();
        let mut node =
            Node::new(node_cfg, durable, now).map_err(|e| Fatal::Config(e.to_string()))?;
        if cfg.has_groups() {
            node.set_log_tag(&format!("group {}: ", spec.name));
        }
        // After signal_fd: the runner thread inherits the mask, so signals still reach
        // the signalfd and never the thread.
        let checks = Checks::start(spec.check.as_ref(), waker.clone(), cfg.id, &spec.name)
            .map_err(|e| Fatal::System(format!("check runner of group {}: {e}", spec.name)))?;
        let mut hooks = Hooks::new(
            cfg.id,
            spec.on_leader.clone(),
            spec.on_follower.clone(),
            cfg.hook_timeout,
        );
        hooks.set_group(&spec.name);
        if cfg.has_groups() {
            hooks.set_log_tag(&format!("group {}: ", spec.name));
        }
        let view = View {
            role: Role::Follower,
            leader: None,
            term: durable.term,
            lease_until: None,
            // SPEC section 13: a server with a check starts unhealthy.
            health: if spec.check.is_some() {
                Verdict::Unknown
            } else {
                Verdict::Ok
            },
            drained: node.drained(),
        };
        let group = Group {
            name: spec.name.clone(),
            view,
            hooks,
            checks,
            handoff: None,
            last_handover_to: None,
            metrics: GroupMetrics::default(),
        };
        Ok((group, node))
    }

    /// "group orders: " when the daemon runs several groups, else nothing: log lines of
    /// a one-group daemon read as they always did.
    pub(super) fn tag(&self, several: bool) -> String {
        if several {
            format!("group {}: ", self.name)
        } else {
            String::new()
        }
    }
}
