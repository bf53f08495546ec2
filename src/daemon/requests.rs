//! Answers to control-socket requests (SPEC section 11): status, watch, supervise,
//! elect, yield, drain, reload...

use super::*;
use crate::json::Obj;

/// The server `yield ID` may name: one in the list that may lead and is not this one.
pub(super) fn yield_target(cfg: &Config, id: u64) -> Result<u16, String> {
    let Some(s) = u16::try_from(id).ok().and_then(|i| cfg.server(i)) else {
        return Err(format!("yield: no server {id} in the server list"));
    };
    if s.id == cfg.id {
        return Err(format!("yield: server {id} is this server; name another"));
    }
    if s.witness {
        return Err(format!("yield: server {id} is a witness and never leads"));
    }
    Ok(s.id)
}

/// The stop timers passed with a `supervise` with `grace` (issue 25), or why they are
/// refused (the descriptors are closed then).
fn passed_timers(
    mut passed: Passed,
    grace: Option<Duration>,
) -> Result<crate::supervise::StopTimers, String> {
    if let Some(why) = passed.refused {
        return Err(format!("supervise: stop timers refused: {why}"));
    }
    if grace.is_none() {
        return Err("supervise: stop timers refused: they need grace_ms=N".into());
    }
    // Refused ones stay in `passed`, closed off the loop when it is dropped.
    crate::supervise::StopTimers::from_passed(&mut passed.fds).map_err(|e| e.to_string())
}

impl Daemon {
    pub(super) fn answer(
        &mut self,
        slot: usize,
        req: Request,
        passed: Passed,
    ) -> Result<(), Fatal> {
        // Descriptors come only with `supervise` (its stop timers); anything else that
        // brings some is refused, and they are closed here.
        let timers = match &req {
            _ if passed.is_empty() => None,
            Request::Supervise(_, grace) => match passed_timers(passed, *grace) {
                Ok(t) => Some(t),
                Err(e) => {
                    warn!("control client {slot}: {e}");
                    self.control.reply(slot, &error_line(&e));
                    return Ok(());
                }
            },
            _ => {
                let e = "descriptors may be passed only with 'supervise' (its stop timers)";
                self.control.reply(slot, &error_line(e));
                return Ok(());
            }
        };
        let line = match req {
            Request::Supervise(g, grace) => {
                // A supervisor guards one group's lease: it must be named when there
                // are several.
                let g = match self.group_index(g.as_deref()) {
                    Ok(g) => g,
                    Err(e) => {
                        self.control.reply(slot, &error_line(&e));
                        return Ok(());
                    }
                };
                let Some(client) = self.control.client_id(slot) else {
                    return Ok(());
                };
                // Refused before anything changes: a connection's timers are replaced
                // only by a `supervise` that is accepted, so a refused second one
                // leaves the first registration, and the timers it re-arms, as they were.
                if let Err(e) = self.host.supervise_refusal(client, g) {
                    self.control.reply(slot, &error_line(&e));
                    return Ok(());
                }
                let pid = self.control.peer_pid(slot);
                // Marked first: its departure from now on reaches the host.
                self.control.mark_supervisor(slot);
                // Held with the connection before the host's first line asks to arm them.
                let previous = timers.map(|t| self.control.replace_timers(slot, Some(t)));
                let has_timers = self.control.has_timers(slot);
                let r = self.drive(|h, now| {
                    if let Err(e) = h.handle_supervise(now, client, g, grace, pid, has_timers) {
                        return Ok(Err(e));
                    }
                    h.flush(now).map(Ok)
                })?;
                if let Err(e) = r {
                    // Checked above, so not reached; should the host refuse for another
                    // reason one day, the timers it knows of are put back.
                    if let Some(previous) = previous {
                        self.control.replace_timers(slot, previous);
                    }
                    self.control.reply(slot, &error_line(&e));
                }
                return Ok(());
            }
            Request::Released(n) => {
                let Some(client) = self.control.client_id(slot) else {
                    return Ok(());
                };
                // A RESIGN this made clear leaves in this flush.
                match self.drive(|h, now| match h.handle_released(client, n) {
                    Ok(()) => h.flush(now).map(Ok),
                    Err(e) => Ok(Err(e)),
                })? {
                    Ok(()) => return Ok(()),
                    Err(e) => error_line(&e),
                }
            }
            Request::Leave => {
                if let Some(client) = self.control.client_id(slot) {
                    self.host.handle_leave(client);
                }
                self.control.unmark_supervisor(slot);
                return Ok(());
            }
            Request::Invalid(e) => error_line(&e),
            Request::Status(None) if self.cfg.has_groups() => self.all_status_line(),
            Request::Status(g) => match self.group_index(g.as_deref()) {
                Ok(g) => self.status_line(g),
                Err(e) => error_line(&e),
            },
            Request::Watch(None) if self.cfg.has_groups() => {
                self.control.watch(slot, Scope::All);
                self.all_status_line()
            }
            Request::Watch(g) => match self.group_index(g.as_deref()) {
                Ok(i) => {
                    self.control.watch(slot, Scope::Group(i));
                    self.status_line(i)
                }
                Err(e) => error_line(&e),
            },
            Request::Ping => Obj::new().bool("ok", true).line(),
            Request::Reload => self.reload_request(slot),
            Request::Metrics => self.metrics_text(),
            Request::Elect(g) => match self.groups_of(g.as_deref()) {
                Ok(gs) => {
                    let now = boot_now();
                    for g in gs {
                        info!(
                            "{}election requested on the control socket",
                            self.groups[g].tag(self.cfg.has_groups())
                        );
                        self.host.group_mut(g).node.handle_elect(now);
                    }
                    self.flush_node()?;
                    Obj::new().bool("ok", true).line()
                }
                Err(e) => error_line(&e),
            },
            Request::Yield(g, None) => match self.groups_of(g.as_deref()) {
                Ok(gs) => self.yield_groups(&gs)?,
                Err(e) => error_line(&e),
            },
            Request::Yield(g, Some(id)) => match self.group_index(g.as_deref()) {
                Ok(g) => self.yield_to(g, id)?,
                Err(e) => error_line(&e),
            },
            Request::Drain(g) => match self.groups_of(g.as_deref()) {
                Ok(gs) => return self.drain(slot, gs, true),
                Err(e) => error_line(&e),
            },
            Request::Undrain(g) => match self.groups_of(g.as_deref()) {
                Ok(gs) => return self.drain(slot, gs, false),
                Err(e) => error_line(&e),
            },
            Request::Health(report) => {
                let Some(client) = self.control.client_id(slot) else {
                    return Ok(());
                };
                // Applied to the core in this flush.
                let r = self.drive(|h, now| match h.handle_supervisor_health(client, report) {
                    Ok(()) => h.flush(now).map(Ok),
                    Err(e) => Ok(Err(e)),
                })?;
                match r {
                    // Like `released`: a supervisor's stream holds numbered lines only.
                    Ok(()) => return Ok(()),
                    Err(e) => error_line(&e),
                }
            }
            Request::Unknown(w) => error_line(&format!(
                "unknown command '{w}' (status, watch, elect, yield [GROUP] [ID], drain, undrain, metrics, ping, reload; supervisors: supervise, released N, health, leave)"
            )),
        };
        self.control.reply(slot, &line);
        Ok(())
    }

    /// `yield` of the groups `gs` (every group this server leads, without a name): ok
    /// when at least one handoff began. With several groups the answer lists them.
    pub(super) fn yield_groups(&mut self, gs: &[usize]) -> Result<String, Fatal> {
        let now = boot_now();
        let several = self.cfg.has_groups();
        let mut yielded = Vec::new();
        for &g in gs {
            if self.host.group_mut(g).node.handle_yield(now) {
                info!(
                    "{}leadership yielded on request",
                    self.groups[g].tag(several)
                );
                yielded.push(g);
            }
        }
        if yielded.is_empty() {
            return Ok(error_line(NOT_LEADER));
        }
        self.flush_node()?;
        let ok = Obj::new().bool("ok", true);
        Ok(if several {
            ok.strs(
                "groups",
                yielded.iter().map(|&g| self.groups[g].name.as_str()),
            )
            .line()
        } else {
            ok.line()
        })
    }

    /// `yield [GROUP] ID`: hand group `g` over to server `id` (SPEC section 14). A
    /// number that names no server, this server or a witness is an error; a server not
    /// known fit still gets the handover named, and the answer says that voters may
    /// fall back.
    pub(super) fn yield_to(&mut self, g: usize, id: u64) -> Result<String, Fatal> {
        let to = match yield_target(&self.cfg, id) {
            Ok(to) => to,
            Err(e) => return Ok(error_line(&e)),
        };
        let now = boot_now();
        let node = &mut self.host.group_mut(g).node;
        let fit = node.peer_fit(now, to);
        if !node.handle_yield_to(now, Some(to)) {
            return Ok(error_line(NOT_LEADER));
        }
        info!(
            "{}leadership yielded on request to server {to} ({})",
            self.groups[g].tag(self.cfg.has_groups()),
            self.cfg.name_of(to)
        );
        self.flush_node()?;
        let why = match fit {
            Some(true) => None,
            Some(false) => Some("last reported itself unfit (unhealthy or drained)"),
            None => Some("has not been heard recently"),
        };
        let answer = Obj::new()
            .bool("ok", true)
            .num("to", u64::from(to))
            .opt_bool("to_fit", fit);
        Ok(match why {
            Some(why) => answer.str(
                "note",
                &format!(
                    "server {to} {why}: voters choose it only if it claims eligibly, otherwise the usual choice"
                ),
            ),
            None => answer,
        }
        .line())
    }

    /// `drain` and `undrain` of the groups `gs` (SPEC section 13) for client `slot`:
    /// applied now, answered once the state file holds the new value. The loop never
    /// waits for that write (SPEC section 12): the answer is held in the control socket
    /// and sent by `answer_drains` when the write has landed and, on a leader, once it
    /// has chosen its successor (at most RTT). A drained leader hands over only when
    /// another server is known fit; until then it leads on, and says so.
    pub(super) fn drain(&mut self, slot: usize, gs: Vec<usize>, drain: bool) -> Result<(), Fatal> {
        let now = boot_now();
        let before: Vec<(bool, u64)> = gs
            .iter()
            .map(|&g| {
                (
                    self.host.group_mut(g).node.drained() != drain,
                    self.groups[g].metrics.handoffs,
                )
            })
            .collect();
        for (&g, &(changed, _)) in gs.iter().zip(&before) {
            if changed {
                self.host.group_mut(g).node.set_drained(now, drain);
            }
        }
        self.flush_node()?;
        if let Some(reply) = self.control.hold(slot) {
            // Bounded by the clients: one held request per live connection (those of
            // connections gone, while a frozen disk holds every write, are forgotten).
            let control = &self.control;
            self.pending_drains.retain(|p| control.still_held(p.reply));
            self.pending_drains.push(PendingDrain {
                reply,
                gs,
                drain,
                before,
                write: self.write_holding_all(),
            });
        }
        self.answer_drains();
        Ok(())
    }

    /// Sends the held answers of `drain`/`undrain` whose value is now on disk and, for
    /// a `drain`, whose groups' leaders here have chosen their successors.
    pub(super) fn answer_drains(&mut self) {
        let mut i = 0;
        while i < self.pending_drains.len() {
            let p = &self.pending_drains[i];
            // The write that held the new value has finished. (Not "the durable value
            // equals the request": a later `undrain` may overwrite it before it is
            // written, and the first answer would then wait for ever.)
            let durable = self.host.metrics().state_writes >= p.write;
            // A drained leader waits (at most RTT) for its followers' answers to the
            // LEAD that said it is unfit before it chooses whom to hand over to; an
            // answer given meanwhile would say "no other fit server known" of a healthy
            // cluster. The wait is a core deadline: the loop wakes at its end.
            let chosen = !p.drain
                || p.gs
                    .iter()
                    .all(|&g| !self.host.group(g).node.choosing_successor());
            if !durable || !chosen {
                i += 1;
                continue;
            }
            let p = self.pending_drains.swap_remove(i);
            let line = self.drain_answer(&p);
            self.control.reply_held(p.reply, &line);
        }
    }

    /// The answer to a `drain`/`undrain` whose value is durable. One group: the
    /// answer it always had; several: one object per group in `groups`.
    fn drain_answer(&self, p: &PendingDrain) -> String {
        let (gs, drain, before) = (&p.gs, p.drain, &p.before);
        let several = self.cfg.has_groups();
        let mut parts = Vec::new();
        for (&g, &(changed, handoffs)) in gs.iter().zip(before.iter()) {
            let group = &self.groups[g];
            let tag = group.tag(several);
            if changed && drain {
                warn!(
                    "{tag}drained on request: this server will not lead until 'electctl undrain'"
                );
            } else if changed {
                info!("{tag}undrained on request: this server may lead again");
            }
            let node = &self.host.group(g).node;
            let o = if several {
                Obj::new().str("group", &group.name)
            } else {
                Obj::new().bool("ok", true)
            };
            let o = o
                .bool("drained", node.drained())
                .bool("changed", changed)
                .str("role", node.status(boot_now()).role.name());
            let o = if !drain {
                o.null("handover")
            } else if group.metrics.handoffs > handoffs {
                o.str("handover", "started")
                    .opt_num("to", group.last_handover_to.map(u64::from))
            } else if node.resign_pending() {
                o.str("handover", "started")
            } else if node.leads().is_some() {
                o.str(
                    "handover",
                    "waiting: no other fit server known; this server leads on and hands over as soon as one is",
                )
            } else {
                o.null("handover")
            };
            parts.push(o);
        }
        if several {
            Obj::new()
                .bool("ok", true)
                .arr("groups", parts.into_iter().map(Obj::finish))
                .line()
        } else {
            parts.remove(0).line()
        }
    }
}

/// A `drain`/`undrain` applied and waiting for its write before it is answered.
pub(super) struct PendingDrain {
    reply: crate::control::HeldReply,
    gs: Vec<usize>,
    drain: bool,
    /// Per group: whether the request changed it, and its handoff count before.
    before: Vec<(bool, u64)>,
    /// The write that holds the new value (see `write_holding_all`).
    write: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn yield_names_a_server_that_may_lead_and_is_not_this_one() {
        let cfg = Config::parse(
            "cluster c\nserver 1 10.0.0.1:7400\nserver 2 10.0.0.2:7400\nserver 3 10.0.0.3:7400 witness\nid 1\nunicast\n",
            Path::new("electd.conf"),
            None,
        )
        .unwrap();
        assert_eq!(yield_target(&cfg, 2), Ok(2));
        for (id, want) in [
            (0, "yield: no server 0 in the server list"),
            (999, "yield: no server 999 in the server list"),
            (4, "yield: no server 4 in the server list"),
            (
                u64::MAX,
                "yield: no server 18446744073709551615 in the server list",
            ),
            (65_538, "yield: no server 65538 in the server list"),
            (1, "yield: server 1 is this server; name another"),
            (3, "yield: server 3 is a witness and never leads"),
        ] {
            assert_eq!(yield_target(&cfg, id), Err(want.to_string()), "{id}");
        }
    }
}
