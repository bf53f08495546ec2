//! The host's supervisor registry (SPEC section 6 Resign, section 8 S5): driven through
//! the host's own inputs on a three-server cluster of hosts joined by an instant,
//! lossless network and instant disks. Each rule here is one the daemon and the
//! simulator both rely on: a RESIGN waits for every supervisor of its group to confirm a
//! line after the last leader line, a supervisor gone unconfirmed holds it to the lease
//! end it was told of, and each group waits only for its own supervisors.

mod hostnet;

use electd::host::{ClientId, Host, Notice, Release, SupervisorLine};
use electd::node::{Durable, Node, NodeConfig, Role};
use electd::time::Time;
use electd::wire::{self, Body};
use hostnet::{HBT, HostNet, host_cfg, ms, node_cfg};
use std::net::SocketAddr;
use std::time::Duration;

/// Three hosts, `groups` groups each; every datagram arrives at once, every write is
/// durable at once. Records every notice and every RESIGN sent.
struct Net {
    hosts: Vec<Host>,
    now: Time,
    notices: Vec<Vec<Notice>>,
    /// (time, sender, group) of every RESIGN sent.
    resigns: Vec<(Time, u16, u8)>,
}

impl Net {
    fn new(groups: usize) -> Net {
        Net::with_missed(groups, 3)
    }

    /// As `new`, with `missed-heartbeats` K.
    fn with_missed(groups: usize, k: u32) -> Net {
        let hosts = (1..=3u16)
            .map(|id| {
                let cfg = host_cfg(id, groups > 1);
                let gs = (0..groups)
                    .map(|g| {
                        let node = Node::new(
                            NodeConfig {
                                missed_heartbeats: k,
                                ..node_cfg(id, 7 * u64::from(id) + g as u64, None)
                            },
                            Durable::default(),
                            ms(0),
                        )
                        .unwrap();
                        (format!("g{g}"), node, Durable::default())
                    })
                    .collect();
                Host::new(cfg, gs, Default::default(), Default::default(), None)
            })
            .collect();
        Net {
            hosts,
            now: ms(0),
            notices: vec![Vec::new(); 3],
            resigns: Vec::new(),
        }
    }

    fn src(id: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7000 + id))
    }

    /// The server leading group `g` (with a valid lease), after running up to 3 s.
    fn leader(&mut self, g: usize) -> usize {
        for _ in 0..30 {
            if let Some(i) = (0..3).find(|&i| self.hosts[i].group(g).node.is_leader(self.now)) {
                return i;
            }
            let t = self.now + HBT;
            self.run_to(t);
        }
        panic!("no leader of group {g}");
    }

    /// The lines host `i` sent to `client`, in order.
    fn lines(&self, i: usize, client: ClientId) -> Vec<SupervisorLine> {
        self.notices[i]
            .iter()
            .filter_map(|n| match n {
                Notice::Supervisor { client: c, line } if *c == client => Some(line.clone()),
                _ => None,
            })
            .collect()
    }

    fn released(&self, i: usize, group: usize) -> Vec<Release> {
        self.notices[i]
            .iter()
            .filter_map(|n| match n {
                Notice::Released { group: g, why } if *g == group => Some(*why),
                _ => None,
            })
            .collect()
    }

    fn resigns_of(&self, i: usize, group: u8) -> usize {
        self.resigns
            .iter()
            .filter(|&&(_, s, g)| s == i as u16 + 1 && g == group)
            .count()
    }

    fn yield_(&mut self, i: usize, g: usize) {
        let now = self.now;
        assert!(self.hosts[i].group_mut(g).node.handle_yield(now));
        self.hosts[i].flush(now).unwrap();
        self.settle();
    }

    fn supervise(&mut self, i: usize, client: ClientId, g: usize) {
        let now = self.now;
        self.hosts[i]
            .handle_supervise(now, client, g, None, None, false)
            .unwrap();
        self.hosts[i].flush(now).unwrap();
        self.settle();
    }

    fn confirm(&mut self, i: usize, client: ClientId, n: u64) {
        let now = self.now;
        self.hosts[i].handle_released(client, n).unwrap();
        self.hosts[i].flush(now).unwrap();
        self.settle();
    }
}

const C0: ClientId = ClientId { slot: 0, serial: 0 };
const C1: ClientId = ClientId { slot: 1, serial: 1 };

/// The last line number sent to `client` that reported this server as leader.
fn last_leader_line(lines: &[SupervisorLine]) -> u64 {
    lines
        .iter()
        .filter(|l| l.role == Role::Leader && l.lease_until.is_some())
        .map(|l| l.n)
        .max()
        .unwrap_or(0)
}

impl HostNet for Net {
    fn hosts(&mut self) -> &mut [Host] {
        &mut self.hosts
    }

    fn now(&mut self) -> &mut Time {
        &mut self.now
    }

    /// Carries every output until none is left.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..3 {
                let id = i as u16 + 1;
                while let Some(n) = self.hosts[i].poll_event() {
                    self.notices[i].push(n);
                }
                if self.hosts[i].poll_write().is_some() {
                    self.hosts[i].handle_write_done(self.now, Ok(())).unwrap();
                    moved = true;
                }
                while let Some(t) = self.hosts[i].poll_transmit() {
                    moved = true;
                    for e in wire::decode_any(&t.bytes, None, 256).map_or(Vec::new(), |b| b.entries)
                    {
                        if matches!(e.msg.body, Body::Lead { resign: true, .. }) {
                            self.resigns.push((self.now, id, e.group));
                        }
                    }
                    for j in 0..3 {
                        let to = j as u16 + 1;
                        let deliver = t.to.reaches(id, to);
                        if deliver {
                            let now = self.now;
                            self.hosts[j]
                                .handle_datagram(now, Self::src(id), &t.bytes)
                                .unwrap();
                        }
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the network never settled");
    }
}

#[test]
fn a_resign_waits_for_a_confirmation_of_a_line_after_the_last_leader_line() {
    let mut net = Net::new(1);
    let l = net.leader(0);
    net.supervise(l, C0, 0);
    let lines = net.lines(l, C0);
    assert_eq!(lines.len(), 1, "one line, not the same twice: {lines:?}");
    assert_eq!(lines[0].n, 1);
    assert_eq!(lines[0].role, Role::Leader, "{lines:?}");
    assert!(lines[0].lease_until.is_some());
    // Renewals are new lines.
    let t = net.now + HBT * 2;
    net.run_to(t);
    let told = last_leader_line(&net.lines(l, C0));
    assert!(told > 1, "no renewal line: {:?}", net.lines(l, C0));
    net.yield_(l, 0);
    assert!(net.hosts[l].group(0).node.resign_pending());
    assert_eq!(
        net.resigns_of(l, 0),
        0,
        "the RESIGN left before any confirmation"
    );
    // The supervisor is told to stop: a line that is not a leader line.
    let lines = net.lines(l, C0);
    let stop = lines.last().unwrap();
    assert!(stop.n > told && stop.role == Role::Follower, "{lines:?}");
    // A confirmation of the last leader line is not enough.
    net.confirm(l, C0, told);
    assert_eq!(
        net.resigns_of(l, 0),
        0,
        "released on the leader line's confirmation"
    );
    assert!(net.released(l, 0).is_empty());
    // Confirming the stop line releases it in the same flush.
    let n = stop.n;
    net.confirm(l, C0, n);
    assert_eq!(net.released(l, 0), [Release::Confirmed]);
    assert_eq!(
        net.resigns_of(l, 0),
        1,
        "the RESIGN did not leave with the release"
    );
    // Errors name the rule.
    let e = net.hosts[l].handle_released(C0, 99).unwrap_err();
    assert!(e.contains("only") && e.contains("lines were sent"), "{e}");
    let e = net.hosts[l].handle_released(C1, 1).unwrap_err();
    assert!(e.contains("not a supervisor"), "{e}");
}

#[test]
fn the_negative_control_releases_on_an_older_confirmation() {
    let mut net = Net::new(1);
    let l = net.leader(0);
    net.hosts[l].set_sabotage(electd::host::HostSabotage {
        release_on_older_confirmation: true,
        ..Default::default()
    });
    net.supervise(l, C0, 0);
    net.confirm(l, C0, 1);
    net.yield_(l, 0);
    assert_eq!(
        net.resigns_of(l, 0),
        1,
        "the sabotage should release on the leader line's confirmation"
    );
}

#[test]
fn a_supervisor_gone_unconfirmed_holds_the_resign_to_the_lease_end_it_was_told() {
    let mut net = Net::new(1);
    let l = net.leader(0);
    net.supervise(l, C0, 0);
    let told = net
        .lines(l, C0)
        .iter()
        .filter_map(|x| x.lease_until)
        .max()
        .unwrap();
    net.hosts[l].handle_client_gone(C0);
    assert_eq!(net.hosts[l].registry().departed_unconfirmed, 1);
    assert_eq!(net.hosts[l].registry().supervisors(0), 0);
    net.yield_(l, 0);
    assert!(
        net.hosts[l].group(0).node.resign_pending(),
        "a RESIGN left while a departed supervisor's command may still run"
    );
    assert!(
        net.hosts[l].next_deadline(net.now) <= told,
        "no wakeup at the departed supervisor's lease end"
    );
    net.run_to(Time(told.0.saturating_sub(1_000_000).max(net.now.0)));
    assert_eq!(
        net.resigns_of(l, 0),
        0,
        "the RESIGN left before the lease end"
    );
    net.run_to(told + Duration::from_millis(1));
    assert_eq!(net.resigns_of(l, 0), 1);
    assert!(
        net.resigns.iter().all(|&(t, _, _)| t >= told),
        "RESIGN at {:?}, lease told {told:?}",
        net.resigns
    );
}

#[test]
fn each_group_waits_only_for_its_own_supervisors_and_a_connection_supervises_one() {
    let mut net = Net::new(2);
    let (l0, l1) = (net.leader(0), net.leader(1));
    net.supervise(l0, C0, 0);
    net.supervise(l1, C1, 1);
    let e = net.hosts[l1]
        .handle_supervise(net.now, C1, 0, None, None, false)
        .unwrap_err();
    assert!(e.contains("another group"), "{e}");
    // Group 1's supervisor never confirms; group 0's handoff does not wait for it.
    net.yield_(l0, 0);
    if l0 == l1 {
        assert_eq!(net.resigns_of(l0, 0), 0);
    }
    let stop = net.lines(l0, C0).last().unwrap().n;
    net.confirm(l0, C0, stop);
    assert_eq!(
        net.resigns_of(l0, 0),
        1,
        "group 0 waited for group 1's supervisor"
    );
    assert_eq!(
        net.resigns_of(l1, 1),
        0,
        "group 1 resigned with nobody asking"
    );
}

#[test]
fn a_health_report_goes_with_its_supervisor_and_leave_holds_nothing() {
    let mut net = Net::new(1);
    let l = net.leader(0);
    let h = &mut net.hosts[l];
    assert!(
        h.handle_supervisor_health(C0, Some("x".into())).is_err(),
        "only a supervisor reports health"
    );
    net.supervise(l, C0, 0);
    let h = &mut net.hosts[l];
    h.handle_supervisor_health(C0, Some("3 exits in 60s".into()))
        .unwrap();
    let all: Vec<_> = h.registry().unhealthy(0).collect();
    assert_eq!(all, vec![(C0, "3 exits in 60s")]);
    h.handle_supervisor_health(C0, None).unwrap();
    assert_eq!(h.registry().unhealthy(0).count(), 0);
    h.handle_supervisor_health(C0, Some("again".into()))
        .unwrap();
    h.handle_client_gone(C0);
    assert_eq!(h.registry().unhealthy(0).count(), 0);
    // `leave`: its command has exited; a handoff does not wait for it.
    net.supervise(l, C1, 0);
    net.hosts[l]
        .handle_supervisor_health(C1, Some("x".into()))
        .unwrap();
    net.hosts[l].handle_leave(C1);
    assert_eq!(net.hosts[l].registry().unhealthy(0).count(), 0);
    assert_eq!(net.hosts[l].registry().departed_unconfirmed, 1, "only C0's");
    assert!(net.hosts[l].handle_released(C1, 1).is_err());
}

#[test]
fn a_supervisor_line_is_the_json_run_reads() {
    let line = SupervisorLine {
        n: 3,
        id: 1,
        group: "a\"b".into(),
        role: Role::Leader,
        leader: Some(1),
        term: 7,
        lease_until: Some(Time(123)),
        now: Time(100),
        lease_len: Duration::from_millis(294),
        heartbeat: HBT,
        rtt: Duration::from_millis(20),
        resigning: false,
        timers: false,
    };
    let json = "{\"n\":3,\"id\":1,\"group\":\"a\\\"b\",\"role\":\"leader\",\"leader\":1,\"term\":7,\"lease_until_ns\":123,\"now_ns\":100,\"lease_len_ns\":294000000,\"heartbeat_ns\":100000000,\"rtt_ns\":20000000,\"resigning\":false";
    assert_eq!(line.to_json(), format!("{json}}}\n"));
    // A supervisor whose stop timers the daemon holds is told so (issue 25).
    let line = SupervisorLine {
        timers: true,
        ..line
    };
    assert_eq!(line.to_json(), format!("{json},\"timers\":true}}\n"));
    let parsed = electd::supervise::parse_line(&line.to_json()).unwrap();
    assert!(parsed.daemon_arms);
}

/// SPEC 13 (issue 22): a stopping server is never a last resort. Every server's check
/// of group 1 fails; server 1 leads both groups; SIGTERM on it yields both, and its
/// group-0 RESIGN waits for a supervisor that never confirms, so it stays stopping for
/// the lease. Group 1 then elects a last resort (a fault every server shares must not
/// leave it leaderless), which must be 2, not 1: server 1 would win the ranking (the
/// smallest id) if a stopping server claimed LAST_RESORT.
#[test]
fn a_stopping_server_is_never_a_last_resort() {
    use electd::health::{Failure, Limits, Outcome};
    let mut net = Net::new(2);
    let limits = Limits {
        fall: 1,
        rise: 1,
        settle: Duration::ZERO,
    };
    let failing = Outcome {
        result: Err(Failure::Exit(1)),
        output: "broker down".into(),
        took: Duration::from_millis(1),
    };
    let ok = Outcome {
        result: Ok(()),
        output: String::new(),
        took: Duration::from_millis(1),
    };
    for h in &mut net.hosts {
        h.set_check(ms(0), 1, Some(limits));
        h.handle_check_result(1, &ok);
        h.flush(ms(0)).unwrap();
    }
    assert_eq!(
        (net.leader(0), net.leader(1)),
        (0, 0),
        "server 1 leads both"
    );
    net.supervise(0, C0, 0);
    let t = net.now + HBT;
    net.run_to(t);
    for i in 0..3 {
        let now = net.now;
        net.hosts[i].handle_check_result(1, &failing);
        net.hosts[i].flush(now).unwrap();
    }
    let t = net.now + 2 * HBT;
    net.run_to(t);
    assert_eq!(
        net.leader(1),
        0,
        "an unhealthy leader leads on while nobody is fit"
    );
    let now = net.now;
    net.hosts[0].handle_stop(now).unwrap();
    net.settle();
    let stop = net.now;
    // Half the lease: server 1 still stopping (its group-0 RESIGN waits).
    let t = net.now + 150 * Duration::from_millis(1);
    net.run_to(t);
    assert!(net.hosts[0].stopping());
    assert!(
        net.resigns_of(0, 0) == 0,
        "group 0's RESIGN waits for the supervisor"
    );
    let lr = (0..3).find(|&i| net.hosts[i].group(1).node.is_leader(net.now));
    assert_eq!(
        lr,
        Some(1),
        "group 1: server 2 leads as a last resort, never the stopping server 1 (stop at {stop:?})"
    );
}

/// Issue 25: a renewal alone is pushed to a supervisor only when the lease end it was
/// last told comes within its grace plus two heartbeats, the rtt and `run`'s MARGIN of
/// now; so it has the newer lease end before it would act on the older one even when a
/// round of acknowledgements is lost, and never one later than the daemon's. With
/// missed-heartbeats 3 (lease 294 ms at heartbeat 100 ms) that is every renewal, as
/// before; with 5 (490 ms) one in two with a grace of 0 (with 100 ms still every one);
/// a supervisor that did not say its grace (an older `run`) gets every one.
#[test]
fn a_renewal_alone_goes_out_only_when_the_told_lease_end_comes_near() {
    let margin = electd::supervise::MARGIN;
    let rtt = Duration::from_millis(20);
    let zero = Some(Duration::ZERO);
    let g100 = Some(Duration::from_millis(100));
    for (k, grace, fewest, most) in [
        (3, zero, 19, 21),
        (3, g100, 19, 21),
        (5, zero, 9, 11),
        (5, g100, 19, 21),
        (5, None, 19, 21),
    ] {
        let mut net = Net::with_missed(1, k);
        let l = net.leader(0);
        let now = net.now;
        net.hosts[l]
            .handle_supervise(now, C0, 0, grace, None, false)
            .unwrap();
        net.hosts[l].flush(now).unwrap();
        net.settle();
        let t = net.now + Duration::from_secs(2);
        net.run_to(t);
        let lines: Vec<SupervisorLine> = net
            .lines(l, C0)
            .into_iter()
            .filter(|x| x.role == Role::Leader)
            .collect();
        // The first line, then one per renewal needed in 2 s (20 renewals).
        let renewals = lines.len() - 1;
        assert!(
            (fewest..=most).contains(&renewals),
            "K {k} grace {grace:?}: {renewals} renewal lines in 2 s"
        );
        for w in lines.windows(2) {
            let (told, next) = (w[0].lease_until.unwrap(), &w[1]);
            let lease = next.lease_until.unwrap();
            assert!(lease >= told, "a renewal moved the lease end back");
            // The newer lease end came before run would act on the older one.
            let acts_at = told - grace.unwrap_or_default() - margin - rtt;
            assert!(
                next.now <= acts_at,
                "K {k} grace {grace:?}: line {} at {:?}, but the lease told at line {} ends at {told:?}",
                next.n,
                next.now,
                w[0].n
            );
        }
    }
}

/// Issue 25, third round: a supervisor whose stop timers the driver holds gets every
/// renewal as an arming of them (`Notice::ArmTimers`), not as a line: in 2 s at
/// heartbeat 100 ms, one leader line and some 20 armings. Every leader line comes after
/// an arming for its own lease end, and every arming is at `stop_at` of a lease end
/// that only grows.
#[test]
fn a_supervisor_with_timers_gets_every_renewal_on_them_and_no_line() {
    let grace = Duration::from_millis(100);
    let mut net = Net::with_missed(1, 3);
    let l = net.leader(0);
    let now = net.now;
    net.hosts[l]
        .handle_supervise(now, C0, 0, Some(grace), None, true)
        .unwrap();
    net.hosts[l].flush(now).unwrap();
    net.settle();
    let t = net.now + Duration::from_secs(2);
    net.run_to(t);
    let mut arms = Vec::new();
    let mut lines = 0;
    for n in &net.notices[l] {
        match n {
            Notice::ArmTimers { client, at, .. } if *client == C0 => arms.push(*at),
            Notice::Supervisor { client, line } if *client == C0 => {
                lines += 1;
                assert!(line.timers, "the line says the daemon holds the timers");
                let u = line.lease_until.expect("leader line").as_nanos();
                assert_eq!(
                    arms.last().copied(),
                    Some(electd::supervise::stop_at(u, grace)),
                    "line {} not preceded by its arming",
                    line.n
                );
            }
            _ => {}
        }
    }
    assert_eq!(lines, 1, "renewals went out as lines");
    assert!(
        (19..=22).contains(&arms.len()),
        "{} armings in 2 s of renewals",
        arms.len()
    );
    for w in arms.windows(2) {
        assert!(
            w[1].kill_ns >= w[0].kill_ns,
            "an arming moved the lease end back"
        );
        assert_eq!(w[1].kill_ns - w[1].term_ns, 100_000_000, "the grace apart");
    }
}
