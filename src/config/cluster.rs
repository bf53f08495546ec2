//! What the rest of electd asks of a configuration: this server and the others, their
//! addresses resolved, the fingerprint, the groups, and the cores' view of each group.

use super::*;

impl Config {
    /// The line of cluster-wide directive `directive`, if the file gives it.
    pub fn line_of(&self, directive: &str) -> Option<usize> {
        self.lines.get(directive).copied()
    }

    /// `FILE:LINE` of `directive` (`FILE` alone when the file does not give it), to
    /// start a message about it.
    pub fn place(&self, directive: &str) -> String {
        match self.line_of(directive) {
            Some(l) => format!("{}:{l}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }

    /// This server's entry in the list.
    pub fn me(&self) -> &Server {
        self.servers
            .iter()
            .find(|s| s.id == self.id)
            .expect("validated: id is listed")
    }

    /// The entry of server `id`.
    pub fn server(&self, id: u16) -> Option<&Server> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// Every server's address (by id), host names resolved to the cluster's family.
    /// Blocking (getaddrinfo, at most `addr::RESOLVE_TIMEOUT`): call it at start and in
    /// `--check-config`, never in the event loop. Errors name the server's line.
    pub fn resolve(&self) -> Result<Vec<(u16, SocketAddr)>, ConfigError> {
        let at = |line: usize, msg: String| ConfigError {
            file: self.path.display().to_string(),
            line: Some(line),
            msg,
        };
        // Each distinct name once; `asks[i]` is server i's question, if it has one.
        let mut names: Vec<(String, u16)> = Vec::new();
        let mut asks: Vec<usize> = Vec::new();
        for s in &self.servers {
            if let Address::Name(n, p) = &s.addr {
                let q = (n.clone(), *p);
                asks.push(names.iter().position(|x| *x == q).unwrap_or(names.len()));
                if !names.contains(&q) {
                    names.push(q);
                }
            } else {
                asks.push(usize::MAX);
            }
        }
        let answers = addr::resolve_names(&names, addr::RESOLVE_TIMEOUT);
        let mut out: Vec<(u16, SocketAddr)> = Vec::with_capacity(self.servers.len());
        for (s, &ask) in self.servers.iter().zip(&asks) {
            let a = match &s.addr {
                Address::Ip(a) => *a,
                Address::Name(n, _) => {
                    let got: &[SocketAddr] = match answers.get(ask) {
                        Some(Ok(got)) => got,
                        Some(Err(e)) => {
                            return Err(at(
                                s.line,
                                format!("server {}: cannot resolve '{n}': {e}", s.id),
                            ));
                        }
                        None => &[],
                    };
                    addr::pick(got, self.family).ok_or_else(|| {
                        let ips: Vec<String> = got.iter().map(|a| a.ip().to_string()).collect();
                        at(
                            s.line,
                            format!(
                                "server {}: '{n}' has no {} address (it resolves to {}); the cluster is {} (one address family per cluster)",
                                s.id,
                                self.family,
                                ips.join(", "),
                                self.family
                            ),
                        )
                    })?
                }
            };
            if let Some((other, _)) = out.iter().find(|(_, o)| *o == a) {
                return Err(at(
                    s.line,
                    format!(
                        "server {} {} is {a}, the address of server {other}",
                        s.id, s.addr
                    ),
                ));
            }
            out.push((s.id, a));
        }
        Ok(out)
    }

    /// CRC-32 of the canonical cluster name and server list (ids, addresses, witness marks).
    /// Textual (SPEC section 16): a host name counts as written (lowercased), never as
    /// what it resolves to, and literals in their canonical form, so an IPv4 list has
    /// the fingerprint it always had. An IPv6 cluster adds its family: a list of names
    /// means other addresses under `unicast ipv6`.
    pub fn fingerprint(&self) -> u32 {
        let mut canon = format!("electd-cluster-v1\ncluster {}\n", self.cluster);
        if self.family == Family::V6 {
            canon.push_str("family ipv6\n");
        }
        for s in &self.servers {
            canon.push_str(&format!(
                "server {} {}{}\n",
                s.id,
                s.addr,
                if s.witness { " witness" } else { "" }
            ));
        }
        // The wire names a group by its index: servers must agree on the list. Without
        // `group` lines nothing is added, so such a cluster keeps its fingerprint.
        if self.has_groups() {
            for g in &self.groups {
                canon.push_str(&format!("group {}\n", g.name));
            }
        }
        crc32fast::hash(canon.as_bytes())
    }

    /// The index of the group called `name`.
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.name == name)
    }

    /// True when the file has `group` lines (more than the implicit `default`).
    pub fn has_groups(&self) -> bool {
        self.groups.first().is_some_and(|g| g.line != 0)
    }

    /// One line about group `g` for `--check-config`: its name and line, its
    /// preference order and where it comes from, its check and its hooks.
    pub fn group_summary(&self, g: usize) -> Option<String> {
        let group = self.groups.get(g)?;
        let ids = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(" ");
        let order = match (&group.prefer, group.order.is_empty()) {
            (Some(p), _) => format!("order {} (prefer)", ids(p)),
            (None, false) => format!("order {} (balance)", ids(&group.order)),
            (None, true) => "order by server priority".to_string(),
        };
        let check = match &group.check {
            Some(c) if c.line < group.line => format!("check (line {}, inherited)", c.line),
            Some(c) => format!("check (line {})", c.line),
            None => "no check".to_string(),
        };
        let hooks: Vec<&str> = [
            ("on-leader", group.on_leader.is_some()),
            ("on-follower", group.on_follower.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(h, _)| *h)
        .collect();
        let hooks = if hooks.is_empty() {
            "no hooks".to_string()
        } else {
            hooks.join(", ")
        };
        Some(format!(
            "group {} (line {}): {order}; {check}; {hooks}",
            group.name, group.line
        ))
    }

    /// The core's view of group `g` (an index into `groups`): the cluster with this
    /// group's priorities.
    pub fn group_node_config(&self, g: usize, seed: u64) -> NodeConfig {
        let mut nc = self.node_config(seed);
        if let Some(group) = self.groups.get(g) {
            for s in &mut nc.servers {
                s.priority = group.priority_of(s.id, s.priority);
            }
        }
        nc
    }

    /// The core's view of this configuration (its first group's priorities are the
    /// servers' own: see `group_node_config`).
    pub fn node_config(&self, seed: u64) -> NodeConfig {
        NodeConfig {
            id: self.id,
            servers: self
                .servers
                .iter()
                .map(|s| ServerInfo {
                    id: s.id,
                    priority: s.priority,
                    witness: s.witness,
                })
                .collect(),
            fingerprint: self.fingerprint(),
            heartbeat: self.heartbeat,
            rtt: self.rtt,
            missed_heartbeats: self.missed_heartbeats,
            preempt_delay: self.preempt_delay,
            drift_ppm: self.drift_ppm,
            max_hold: self.max_hold,
            seed,
            strict: false,
            sabotage: Sabotage::default(),
        }
    }

    /// The name of server `id` (its `name`, or its id).
    pub fn name_of(&self, id: u16) -> String {
        self.server(id)
            .and_then(|s| s.name.clone())
            .unwrap_or_else(|| id.to_string())
    }
}
