//! Reloading the configuration (SIGHUP and the socket's `reload`): what is applied at
//! once and what is refused because it needs a restart.

use super::*;
use crate::host::ReloadTimers;

/// Binds `metrics-listen` (None: off) and registers it under `HTTP`.
pub(super) fn bind_metrics(
    addr: Option<std::net::SocketAddr>,
    reg: &mio::Registry,
) -> Result<Option<Http>, String> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let mut h = Http::bind(addr, HTTP.0)
        .map_err(|e| format!("metrics-listen {addr}: cannot listen: {e}"))?;
    h.register(reg, HTTP)
        .map_err(|e| format!("metrics-listen {addr}: poll register: {e}"))?;
    info!("metrics on http://{}/metrics", h.addr());
    Ok(Some(h))
}

/// What a reload may not change (besides the fingerprint): id, transport, socket and
/// state. Changing them needs a restart.
pub(super) fn fixed_settings(
    c: &Config,
) -> (u16, Mode, std::path::PathBuf, u32, std::path::PathBuf) {
    (
        c.id,
        c.transport.clone(),
        c.socket.clone(),
        c.socket_mode,
        c.state.clone(),
    )
}

/// The servers' priorities: the core takes them at start only.
/// Every group's priority of every server: the cores read them at start only.
pub(super) fn priorities(c: &Config) -> Vec<Vec<u8>> {
    (0..c.groups.len())
        .map(|g| {
            c.group_node_config(g, 0)
                .servers
                .iter()
                .map(|s| s.priority)
                .collect()
        })
        .collect()
}

impl Daemon {
    /// SIGHUP and the socket's `reload` (SPEC section 12): re-reads the file and applies
    /// it, or refuses it whole and keeps the running configuration. Either way the
    /// outcome is logged (a refusal at error level) and shown in `status` and systemd's
    /// STATUS= until the next reload: a refused file stays on disk, and the next restart
    /// would load it.
    pub(super) fn reload(&mut self) -> Result<(), String> {
        let outcome = self.try_reload();
        match &outcome {
            Ok(()) => {
                if self.config_refused.take().is_some() {
                    info!("the configuration file is running again: the earlier refusal is over");
                }
            }
            Err(why) => {
                error!("{RELOAD_REFUSED}: {why}; the running configuration stays");
                self.config_refused = Some(one_line(why, MAX_REFUSAL));
            }
        }
        self.notifier.send(&self.status_text());
        outcome
    }

    /// The reload itself: everything is checked before anything is applied, so a
    /// refusal changes nothing. Applies timers, keys (rotation, not on or off), the
    /// check, `preempt-delay`, hooks and log level; refuses a change of the cluster
    /// name, server list, priorities, id, transport, socket, socket mode or state path,
    /// and timers that leave a connected supervisor's grace no room (SPEC 11).
    pub(super) fn try_reload(&mut self) -> Result<(), String> {
        let new =
            Config::load_regular(&self.cfg.path, self.id_override).map_err(|e| e.to_string())?;
        if new.fingerprint() != self.cfg.fingerprint() {
            let names =
                |c: &Config| -> Vec<String> { c.groups.iter().map(|g| g.name.clone()).collect() };
            if names(&new) != names(&self.cfg) {
                // The wire names a group by its index in the list.
                return Err(format!(
                    "the group list changed ({} -> {}); restart every server with the new list",
                    names(&self.cfg).join(" "),
                    names(&new).join(" ")
                ));
            }
            return Err(
                "the cluster name or server list changed; restart every server with the new list"
                    .into(),
            );
        }
        if fixed_settings(&new) != fixed_settings(&self.cfg) {
            return Err(
                "id, transport, socket, socket-mode or state path changed; these need a restart"
                    .into(),
            );
        }
        if priorities(&new) != priorities(&self.cfg) {
            return Err(
                "a server's priority, a group's prefer list or balance changed; this needs a restart"
                    .into(),
            );
        }
        let keys = auth::load_keys(new.key_file.as_deref(), new.key_file_next.as_deref())?;
        if keys.is_some() != self.host.keyed() {
            return Err("turning authentication on or off needs a restart of every server".into());
        }
        // Applied by rebinding (bound here, installed below): turning metrics on or
        // moving them must not need a restart, which would move the leadership. A
        // listener bound here and not installed closes when dropped on a refusal.
        let metrics = self.rebind_metrics(new.metrics_listen)?;
        let timers = |c: &Config| ReloadTimers {
            heartbeat: c.heartbeat,
            rtt: c.rtt,
            missed_heartbeats: c.missed_heartbeats,
            drift_ppm: c.drift_ppm,
            max_hold: c.max_hold,
        };
        // The graces of supervisors still connected only.
        self.take_departures();
        let before = self.host.handle_reload_timers(timers(&new))?;
        // Every group or none: a failure below puts back the running timers.
        let mut before = Some(before);
        for g in 0..self.groups.len() {
            if let Err(e) = self.groups[g]
                .checks
                .reconfigure(new.groups[g].check.as_ref())
            {
                if let Some(b) = before.take() {
                    self.host.restore_timers(b);
                }
                // All or nothing: the groups before this one get their checks back.
                for (k, group) in self.groups[..g].iter_mut().enumerate() {
                    if let Err(back) = group.checks.reconfigure(self.cfg.groups[k].check.as_ref()) {
                        error!(
                            "reload: cannot restore the check of group {}: {back}",
                            group.name
                        );
                    }
                }
                return Err(format!(
                    "the check runner of group {} could not start: {e}",
                    new.groups[g].name
                ));
            }
        }
        // Every runner took its check: the verdicts follow (a reload is no restart).
        for (g, spec) in new.groups.iter().enumerate() {
            self.host
                .reload_check(g, spec.check.as_ref().map(crate::health::limits));
        }
        if keys.is_some()
            && (new.key_file != self.cfg.key_file || new.key_file_next != self.cfg.key_file_next)
        {
            info!("keys reloaded");
        }
        self.host.set_keys(keys);
        for w in new.warnings() {
            warn!("{w}");
        }
        if new.preempt_delay != self.cfg.preempt_delay {
            info!(
                "preempt-delay {}",
                new.preempt_delay
                    .map_or("off".to_string(), |d| format!("{d:?}"))
            );
        }
        for (i, (g, spec)) in self.groups.iter_mut().zip(&new.groups).enumerate() {
            let node = &mut self.host.group_mut(i).node;
            node.set_preempt_delay(boot_now(), new.preempt_delay);
            g.hooks.reconfigure(
                spec.on_leader.clone(),
                spec.on_follower.clone(),
                new.hook_timeout,
            );
        }
        // The level a restart with this file would run: a `log-level` removed goes
        // back to RUST_LOG or info (it used to keep the old one).
        log::set_max_level(crate::config::effective_log_level(
            self.cli_log_level,
            new.log_level,
        ));
        if let Some(m) = metrics {
            if m.is_none() {
                info!("metrics-listen off: the metrics listener is closed");
            }
            // The old listener and its connections close here (scrapers reconnect).
            self.http = m;
        }
        // Longer timers wait for their hold on the state disk (`Node::set_timers`):
        // say so, or an operator whose disk stalls sees the old ones go on unexplained.
        let waiting = self.host.groups().iter().any(|g| g.node.timers_waiting());
        info!(
            "configuration reloaded: heartbeat {:?}, rtt {:?}, missed-heartbeats {}{}",
            new.heartbeat,
            new.rtt,
            new.missed_heartbeats,
            if waiting {
                " (in force once their longer hold is written to the state file)"
            } else {
                ""
            }
        );
        self.cfg = new;
        Ok(())
    }

    /// A changed `metrics-listen` on reload: None when unchanged, else the listener to
    /// install (None: off). The new address is bound before the old one closes, so a
    /// refused reload leaves the running listener as it was.
    pub(super) fn rebind_metrics(
        &self,
        addr: Option<std::net::SocketAddr>,
    ) -> Result<Option<Option<Http>>, String> {
        if addr == self.cfg.metrics_listen {
            return Ok(None);
        }
        bind_metrics(addr, self.poll.registry()).map(Some).map_err(|e| match &self.http {
            Some(old) => format!(
                "{e} (the running listener on {} stays; to move to an address that conflicts with it, reload with metrics-listen off first)",
                old.addr()
            ),
            None => e,
        })
    }

    /// The socket's `reload`: allowed to whoever may send the daemon SIGHUP (root and
    /// the daemon's own user, the unit's ExecReload), not to every member of the
    /// socket's group. Answers `{"ok":true,...}` or the refusal with `"refused":true`.
    pub(super) fn reload_request(&mut self, slot: usize) -> String {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        match self.control.peer_uid(slot) {
            Some(uid) if uid == 0 || uid == me => {
                info!("reload requested on the control socket (uid {uid})");
            }
            other => {
                let who = other.map_or("an unknown user".to_string(), |u| format!("uid {u}"));
                warn!(
                    "reload refused to {who} on the control socket: only root and uid {me} may reload"
                );
                return error_line(&format!(
                    "reload: permission denied for {who}: only root and the daemon's user (uid {me}) may reload, as for SIGHUP"
                ));
            }
        }
        match self.reload() {
            Ok(()) => crate::json::Obj::new()
                .bool("ok", true)
                .str("config", &self.cfg.path.display().to_string())
                .line(),
            Err(why) => crate::json::Obj::new()
                .str("error", &format!("{RELOAD_REFUSED}: {why}"))
                .bool("refused", true)
                .line(),
        }
    }
}
