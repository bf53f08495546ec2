//! Answers to control-socket requests (SPEC section 11): status, watch, supervise,
//! elect, yield, drain, reload...

use super::*;

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

impl Daemon {
    pub(super) fn answer(&mut self, slot: usize, req: Request) -> Result<(), Fatal> {
        let line = match req {
            Request::Supervise(g) => {
                if let Err(e) = self.group_index(g.as_deref()) {
                    self.control.reply(slot, &error_line(&e));
                    return Ok(());
                }
                if let Err(e) = self.control.supervise(slot, 0) {
                    self.control.reply(slot, &error_line(&e));
                    return Ok(());
                }
                let (fields, until) = self.supervisor_fields();
                self.control.push_supervisor(slot, &fields, until);
                return Ok(());
            }
            Request::Released(n) => match self.control.confirm(slot, n) {
                Ok(()) => return Ok(()),
                Err(e) => error_line(&e),
            },
            Request::Leave => {
                self.control.leave(slot);
                return Ok(());
            }
            Request::Invalid(e) => error_line(&e),
            Request::Status(g) => match self.group_index(g.as_deref()) {
                Ok(_) => self.status_line(),
                Err(e) => error_line(&e),
            },
            Request::Watch(g) => match self.group_index(g.as_deref()) {
                Ok(i) => {
                    self.control.watch(slot, Scope::Group(i));
                    self.status_line()
                }
                Err(e) => error_line(&e),
            },
            Request::Ping => "{\"ok\":true}\n".into(),
            Request::Reload => self.reload_request(slot),
            Request::Metrics => self.metrics_text(),
            Request::Elect(Some(g))
            | Request::Drain(Some(g))
            | Request::Undrain(Some(g))
            | Request::Yield(Some(g), _)
                if self.group_index(Some(&g)).is_err() =>
            {
                error_line(&self.group_index(Some(&g)).unwrap_err())
            }
            Request::Elect(_) => {
                info!("election requested on the control socket");
                self.node.handle_elect(boot_now());
                self.flush_node()?;
                "{\"ok\":true}\n".into()
            }
            Request::Yield(_, None) => {
                if self.node.handle_yield(boot_now()) {
                    info!("leadership yielded on request");
                    self.flush_node()?;
                    "{\"ok\":true}\n".into()
                } else {
                    error_line(NOT_LEADER)
                }
            }
            Request::Yield(_, Some(id)) => self.yield_to(id)?,
            Request::Drain(_) => self.drain(true)?,
            Request::Undrain(_) => self.drain(false)?,
            Request::Health(report) => match self.control.set_supervisor_health(slot, report) {
                // Like `released`: a supervisor's stream holds numbered lines only.
                Ok(()) => return Ok(()),
                Err(e) => error_line(&e),
            },
            Request::Unknown(w) => error_line(&format!(
                "unknown command '{w}' (status, watch, elect, yield [ID], drain, undrain, metrics, ping, reload; supervisors: supervise, released N, health, leave)"
            )),
        };
        self.control.reply(slot, &line);
        Ok(())
    }

    /// The index of the election group a request names (None: the default group).
    pub(super) fn group_index(&self, name: Option<&str>) -> Result<usize, String> {
        match name {
            None | Some("default") => Ok(0),
            Some(g) => Err(format!("no group '{g}' (this server's groups: default)")),
        }
    }

    /// `yield ID`: hand over to server `id` (SPEC section 14). A number that names no
    /// server, this server or a witness is an error; a server not known fit still gets
    /// the handover named, and the answer says that voters may fall back.
    pub(super) fn yield_to(&mut self, id: u64) -> Result<String, Fatal> {
        let to = match yield_target(&self.cfg, id) {
            Ok(to) => to,
            Err(e) => return Ok(error_line(&e)),
        };
        let now = boot_now();
        let fit = self.node.peer_fit(now, to);
        if !self.node.handle_yield_to(now, Some(to)) {
            return Ok(error_line(NOT_LEADER));
        }
        info!(
            "leadership yielded on request to server {to} ({})",
            self.cfg.name_of(to)
        );
        self.flush_node()?;
        let note = match fit {
            Some(true) => String::new(),
            Some(false) => format!(
                ",\"note\":{}",
                json_str(&format!(
                    "server {to} last reported itself unfit (unhealthy or drained): voters choose it only if it claims eligibly, otherwise the usual choice"
                ))
            ),
            None => format!(
                ",\"note\":{}",
                json_str(&format!(
                    "server {to} has not been heard recently: voters choose it only if it claims eligibly, otherwise the usual choice"
                ))
            ),
        };
        Ok(format!(
            "{{\"ok\":true,\"to\":{to},\"to_fit\":{}{note}}}\n",
            fit.map_or("null".into(), |f| f.to_string())
        ))
    }

    /// `drain` and `undrain` (SPEC section 13): answered once the state file holds the
    /// new value (`flush_node` writes it before returning). A drained leader hands over
    /// only when another server is known fit; until then it leads on, and says so.
    pub(super) fn drain(&mut self, drain: bool) -> Result<String, Fatal> {
        let now = boot_now();
        let changed = self.node.drained() != drain;
        let handoffs = self.metrics.handoffs;
        if changed {
            self.node.set_drained(now, drain);
            self.flush_node()?;
            if drain {
                warn!("drained on request: this server will not lead until 'electctl undrain'");
            } else {
                info!("undrained on request: this server may lead again");
            }
        }
        let handover = if !drain {
            "null".to_string()
        } else if self.metrics.handoffs > handoffs {
            let to = self.last_handover_to;
            format!(
                "\"started\",\"to\":{}",
                to.map_or("null".into(), |t| t.to_string())
            )
        } else if self.node.resign_pending() {
            "\"started\"".into()
        } else if self.node.leads().is_some() {
            json_str(
                "waiting: no other fit server known; this server leads on and hands over as soon as one is",
            )
        } else {
            "null".into()
        };
        Ok(format!(
            "{{\"ok\":true,\"drained\":{},\"changed\":{changed},\"role\":\"{}\",\"handover\":{handover}}}\n",
            self.node.drained(),
            self.node.status(boot_now()).role.name()
        ))
    }
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
