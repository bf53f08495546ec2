//! Issue 25, one flush a heartbeat: the datagrams that waited for a host's wakeup
//! (`Host::datagrams_may_wait`) are handed in with `handle_waiting_datagram`, not
//! flushed one by one, and leave with the wakeup's timers in one flush. This checks
//! that it changes nothing anyone can see: two identical three-host clusters run the
//! same script, one handing its waiting datagrams in one by one with a flush each
//! (`handle_datagram`, as before), the other with one flush for all; every datagram
//! sent, every event, every state written and every status must be the same, in the
//! same order. The script leaves rest and comes back: a steady leader, a follower
//! muted for a while, an election started by a follower against the resting leader
//! (its ELECT waits in the leader's socket and asks for a write), a yield.

mod hostnet;

use electd::host::Host;
use electd::node::{Durable, Node};
use electd::time::Time;
use hostnet::{HBT, HostNet, host_cfg, ms, node_cfg};
use std::net::SocketAddr;

/// Three hosts on an instant network with instant disks, whose datagrams wait in a
/// socket while the receiving host says they may, and are read at its next wakeup.
struct Net {
    hosts: Vec<Host>,
    now: Time,
    /// Each host's socket: (sender, datagram), read at its next wakeup.
    socket: Vec<Vec<(u16, Vec<u8>)>>,
    /// One flush for every waiting datagram (`handle_waiting_datagram`), or one each.
    one_flush: bool,
    /// A server whose datagrams are lost.
    mute: Option<u16>,
    /// Everything anyone could see, in order.
    log: Vec<String>,
    /// Datagrams read at a wakeup (so a run that never waits cannot pass).
    waited: usize,
}

impl Net {
    fn new(one_flush: bool) -> Net {
        let hosts = (1..=3u16)
            .map(|id| {
                let node = Node::new(
                    node_cfg(id, 11 * u64::from(id), Some(1)),
                    Durable::default(),
                    ms(0),
                )
                .unwrap();
                Host::new(
                    host_cfg(id, false),
                    vec![("g".to_string(), node, Durable::default())],
                    Default::default(),
                    Default::default(),
                    None,
                )
            })
            .collect();
        Net {
            hosts,
            now: ms(0),
            socket: vec![Vec::new(); 3],
            one_flush,
            mute: None,
            log: Vec::new(),
            waited: 0,
        }
    }

    fn src(id: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7000 + id))
    }

    /// Host `i` reads what waited in its socket, as the daemon's loop does before its
    /// timers; the caller flushes (through `handle_timeout` or `flush`) right after.
    fn read_socket(&mut self, i: usize) {
        let now = self.now;
        for (from, bytes) in std::mem::take(&mut self.socket[i]) {
            self.waited += 1;
            let ok = if self.one_flush {
                self.hosts[i].handle_waiting_datagram(now, Self::src(from), &bytes)
            } else {
                self.hosts[i]
                    .handle_datagram(now, Self::src(from), &bytes)
                    .unwrap()
            };
            self.log
                .push(format!("{now:?} {} read from {from}: {ok}", i + 1));
        }
    }

    /// What host `i` shows: its core's status.
    fn status(&self, i: usize) -> String {
        let st = self.hosts[i].group(0).node.status(self.now);
        format!(
            "{:?} {} {:?} {:?} {:?} {:?}",
            self.now,
            i + 1,
            st.role,
            st.leader,
            st.term,
            st.lease_until
        )
    }

    /// Applies `f` to host `i` (after reading its socket: an input wakes it), flushes.
    fn with(&mut self, i: usize, f: impl FnOnce(&mut Host, Time)) {
        self.read_socket(i);
        let now = self.now;
        f(&mut self.hosts[i], now);
        self.hosts[i].flush(now).unwrap();
        self.settle();
    }
}

impl HostNet for Net {
    fn hosts(&mut self) -> &mut [Host] {
        &mut self.hosts
    }

    fn now(&mut self) -> &mut Time {
        &mut self.now
    }

    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..3 {
                let id = i as u16 + 1;
                while let Some(n) = self.hosts[i].poll_event() {
                    self.log.push(format!("{:?} {id} notice {n:?}", self.now));
                }
                if let Some(w) = self.hosts[i].poll_write() {
                    self.log
                        .push(format!("{:?} {id} write {:?}", self.now, w.by_group));
                    self.hosts[i].handle_write_done(self.now, Ok(())).unwrap();
                    moved = true;
                }
                while let Some(t) = self.hosts[i].poll_transmit() {
                    moved = true;
                    self.log.push(format!(
                        "{:?} {id} sends {:?} {:02x?}",
                        self.now, t.to, t.bytes
                    ));
                    if self.mute == Some(id) {
                        continue;
                    }
                    for j in 0..3 {
                        let to = j as u16 + 1;
                        if !t.to.reaches(id, to) {
                            continue;
                        }
                        let now = self.now;
                        if self.hosts[j].datagrams_may_wait(now) {
                            self.socket[j].push((id, t.bytes.clone()));
                        } else {
                            self.read_socket(j);
                            self.hosts[j]
                                .handle_datagram(now, Self::src(id), &t.bytes)
                                .unwrap();
                        }
                    }
                }
            }
            for i in 0..3 {
                let s = self.status(i);
                self.log.push(s);
            }
            if !moved {
                return;
            }
        }
        panic!("the network never settled");
    }

    /// Each host reads its socket before its timers, as the daemon's loop does.
    fn before_timeout(&mut self, i: usize) {
        self.read_socket(i);
    }
}

/// The script: a leader at rest, a muted follower, an election a follower starts
/// against the resting leader, a yield; returns the transcript and the datagrams read
/// at a wakeup.
fn script(one_flush: bool) -> (Vec<String>, usize) {
    let mut net = Net::new(one_flush);
    net.run_to(ms(3000));
    let leader = (0..3)
        .find(|&i| net.hosts[i].group(0).node.is_leader(net.now))
        .expect("a leader");
    assert_eq!(leader, 0, "server 1 is preferred");
    assert!(
        net.hosts[0].datagrams_may_wait(net.now),
        "the leader is at rest"
    );
    // Follower 2 silent for five heartbeats, then back.
    net.mute = Some(2);
    net.run_to(net.now + HBT * 5);
    net.mute = None;
    net.run_to(net.now + HBT * 20);
    // Follower 3 starts an election against the leader at rest: its ELECT waits in
    // the leader's socket.
    net.with(2, |h, now| h.group_mut(0).node.handle_elect(now));
    net.run_to(net.now + HBT * 30);
    // The leader yields, and is preferred: it comes back.
    let l = (0..3)
        .find(|&i| net.hosts[i].group(0).node.is_leader(net.now))
        .expect("a leader");
    net.with(l, |h, now| {
        h.group_mut(0).node.handle_yield(now);
    });
    net.run_to(net.now + HBT * 60);
    (net.log, net.waited)
}

#[test]
fn one_flush_for_the_waiting_datagrams_changes_nothing_seen() {
    let (each, waited_each) = script(false);
    let (one, waited_one) = script(true);
    assert!(waited_one > 100, "only {waited_one} datagrams waited");
    assert_eq!(waited_each, waited_one, "the two runs read differently");
    for (k, (a, b)) in each.iter().zip(&one).enumerate() {
        assert_eq!(a, b, "the transcripts part at line {k}");
    }
    assert_eq!(each.len(), one.len());
    let reads = one.iter().filter(|l| l.contains(" read from ")).count();
    assert_eq!(reads, waited_one);
}
