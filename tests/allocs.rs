//! Issue 25, cost at rest: a steady three-server cluster of hosts (instant, lossless
//! network, instant disks) makes no heap allocation per heartbeat, on the leader (tick,
//! LEAD encoded, the ACKs decoded, the lease renewed, supervisors' timers re-armed) or
//! on a follower (LEAD decoded, ACK encoded). A counting global allocator counts the
//! allocations made inside the hosts' calls only, on this test's own thread; the
//! driver hands each sent datagram's buffer back (`Host::recycle`), as the daemon does.

mod hostnet;

use electd::auth::Keys;
use electd::host::{ClientId, Host, HostConfig, Notice};
use electd::node::{Durable, Node};
use electd::time::Time;
use hostnet::{HBT, host_cfg, ms, node_cfg};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;

struct Counting;

thread_local! {
    /// Allocations made on this thread while `COUNTING` is on.
    static COUNT: Cell<u64> = const { Cell::new(0) };
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn note() {
    // `try_with`: the allocator may run while thread-locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`, returning what it returned and the allocations it made.
fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = COUNT.with(Cell::get);
    COUNTING.with(|on| on.set(true));
    let r = f();
    COUNTING.with(|on| on.set(false));
    (r, COUNT.with(Cell::get) - before)
}

fn keys() -> Keys {
    Keys {
        current: electd::wire::Key::new(&[7u8; 32]),
        next: None,
    }
}

/// Three hosts of one group; counts each host's allocations while `on`.
struct Net {
    hosts: Vec<Host>,
    now: Time,
    on: bool,
    /// Allocations inside each host's calls while `on`.
    allocs: [u64; 3],
    /// Datagrams each host sent while `on`.
    sent: [u64; 3],
    /// Supervisor lines and timer armings while `on`, per host.
    lines: [u64; 3],
    arms: [u64; 3],
    /// State-file writes handed out while `on` (none at rest: nothing changed).
    writes: [u64; 3],
    /// Hands sent buffers back (`Host::recycle`), as the daemon does.
    recycle: bool,
    /// With `Some`: every datagram (sender, destination, bytes) and notice, in order.
    trace: Option<Vec<String>>,
}

impl Net {
    fn new(keyed: bool) -> Net {
        let hosts = (1..=3u16)
            .map(|id| {
                let cfg = HostConfig {
                    sources: Some((1..=3).map(|i| (i, Net::src(i))).collect()),
                    ..host_cfg(id, false)
                };
                let node = Node::new(
                    node_cfg(id, 11 * u64::from(id), None),
                    Durable::default(),
                    ms(0),
                )
                .unwrap();
                let gs = vec![("default".to_string(), node, Durable::default())];
                Host::new(
                    cfg,
                    gs,
                    Default::default(),
                    Default::default(),
                    keyed.then(keys),
                )
            })
            .collect();
        Net {
            hosts,
            now: ms(0),
            on: false,
            allocs: [0; 3],
            sent: [0; 3],
            lines: [0; 3],
            arms: [0; 3],
            writes: [0; 3],
            recycle: true,
            trace: None,
        }
    }

    fn src(id: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7600 + id))
    }

    /// Runs `f` on host `i`, counting its allocations while `on`.
    fn call(&mut self, i: usize, f: impl FnOnce(&mut Host)) {
        let h = &mut self.hosts[i];
        let ((), n) = counted(|| f(h));
        if self.on {
            self.allocs[i] += n;
        }
    }

    /// Carries every output until none is left: writes are durable at once, datagrams
    /// arrive at once.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..3 {
                let id = i as u16 + 1;
                loop {
                    let mut n = None;
                    self.call(i, |h| n = h.poll_event());
                    if let (Some(tr), Some(n)) = (self.trace.as_mut(), &n) {
                        tr.push(format!("{i} {n:?}"));
                    }
                    match n {
                        Some(Notice::Supervisor { .. }) => self.lines[i] += u64::from(self.on),
                        Some(Notice::ArmTimers { .. }) => self.arms[i] += u64::from(self.on),
                        Some(_) => {}
                        None => break,
                    }
                }
                let mut w = None;
                self.call(i, |h| w = h.poll_write());
                if w.is_some() {
                    self.writes[i] += u64::from(self.on);
                    let now = self.now;
                    self.call(i, |h| h.handle_write_done(now, Ok(())).unwrap());
                    moved = true;
                }
                loop {
                    let mut t = None;
                    self.call(i, |h| t = h.poll_transmit());
                    let Some(t) = t else { break };
                    moved = true;
                    self.sent[i] += u64::from(self.on);
                    if let Some(tr) = self.trace.as_mut() {
                        tr.push(format!("{i} {:?} {:?} {:?}", t.to, t.kinds, t.bytes));
                    }
                    for j in 0..3 {
                        let to = j as u16 + 1;
                        let deliver = t.to.reaches(id, to);
                        if deliver {
                            let now = self.now;
                            self.call(j, |h| {
                                assert!(h.handle_datagram(now, Net::src(id), &t.bytes).unwrap())
                            });
                        }
                    }
                    if self.recycle {
                        self.call(i, |h| h.recycle(t.bytes));
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the network never settled");
    }

    /// Runs time forward to `until`, firing each host's deadlines in order.
    fn run_to(&mut self, until: Time) {
        self.settle();
        loop {
            let now = self.now;
            let next = self
                .hosts
                .iter()
                .map(|h| h.next_deadline(now))
                .min()
                .unwrap();
            let next = next.max(now);
            if next > until {
                break;
            }
            self.now = next;
            for i in 0..3 {
                if self.hosts[i].next_deadline(next) <= next {
                    self.call(i, |h| h.handle_timeout(next).unwrap());
                }
            }
            self.settle();
        }
        self.now = until;
    }

    fn leader(&self) -> usize {
        let now = self.now;
        (0..3)
            .find(|&i| self.hosts[i].group(0).node.is_leader(now))
            .expect("a leader")
    }
}

const HEARTBEATS: u64 = 100;

/// Warms the cluster up (an election, a few seconds of heartbeats, so every buffer has
/// grown to what the steady state needs), then counts `HEARTBEATS` heartbeats.
fn steady(keyed: bool, supervisors: Option<bool>) -> Net {
    let mut net = Net::new(keyed);
    net.run_to(ms(2_000));
    let l = net.leader();
    if let Some(timers) = supervisors {
        // As `electctl run --grace 100ms` on every server.
        for i in 0..3 {
            let now = net.now;
            let c = ClientId { slot: 1, serial: 1 };
            net.hosts[i]
                .handle_supervise(now, c, 0, Some(HBT), Some(42), timers)
                .unwrap();
            net.hosts[i].flush(now).unwrap();
        }
    }
    net.run_to(ms(5_000));
    assert_eq!(net.leader(), l, "the leader changed during the warm-up");
    net.on = true;
    let t = net.now + HBT * HEARTBEATS as u32;
    net.run_to(t);
    assert_eq!(net.leader(), l, "the leader changed");
    assert_eq!(net.writes, [0; 3], "state written at rest");
    // Every heartbeat: a LEAD from the leader, an ACK from the follower it asks (sparse
    // acknowledgements: each follower in turn, so half the heartbeats each).
    assert_eq!(net.sent[l], HEARTBEATS, "LEADs sent: {:?}", net.sent);
    for f in (0..3).filter(|&f| f != l) {
        assert_eq!(net.sent[f], HEARTBEATS / 2, "ACKs sent: {:?}", net.sent);
    }
    eprintln!(
        "keyed {keyed}, supervisors {supervisors:?}: leader {} allocations, followers {:?}; sent {:?}, lines {:?}, arms {:?}",
        net.allocs[l], net.allocs, net.sent, net.lines, net.arms
    );
    net
}

fn assert_none(net: &Net) {
    let l = net.leader();
    assert_eq!(
        net.allocs[l], 0,
        "the leader allocated over {HEARTBEATS} heartbeats: {:?} (per host)",
        net.allocs
    );
    for f in (0..3).filter(|&f| f != l) {
        assert_eq!(
            net.allocs[f], 0,
            "a follower allocated over {HEARTBEATS} heartbeats: {:?} (per host)",
            net.allocs
        );
    }
}

#[test]
fn a_steady_cluster_allocates_nothing_per_heartbeat() {
    assert_none(&steady(false, None));
}

#[test]
fn a_steady_keyed_cluster_allocates_nothing_per_heartbeat() {
    assert_none(&steady(true, None));
}

/// `electctl run` passes its stop timers: every renewal re-arms them (a notice, no
/// line).
#[test]
fn a_steady_leader_with_supervisors_allocates_nothing_per_heartbeat() {
    let net = steady(false, Some(true));
    let l = net.leader();
    assert!(net.arms[l] >= HEARTBEATS, "no re-arming: {:?}", net.arms);
    assert_none(&net);
}

/// A supervisor without stop timers (an older `run`, or `ELECTCTL_RUN_NO_TIMERS=1`)
/// is sent a line at each renewal it needs: each line holds its group's name (a
/// `String`), one allocation per line, nothing else.
#[test]
fn a_line_to_a_supervisor_without_timers_is_its_only_allocation() {
    let net = steady(false, Some(false));
    let l = net.leader();
    assert!(
        net.lines[l] >= HEARTBEATS / 2,
        "no renewal lines: {:?}",
        net.lines
    );
    assert_eq!(
        net.allocs[l], net.lines[l],
        "{:?} {:?}",
        net.allocs, net.lines
    );
    for f in (0..3).filter(|&f| f != l) {
        assert_eq!(net.allocs[f], 0, "{:?}", net.allocs);
    }
}

/// The buffers handed back are a cache: a driver that recycles them sees the same
/// datagrams, byte for byte, the same notices and the same state as one that does
/// not, through elections, handoffs, supervisors' lines and keyed counters.
#[test]
fn recycled_buffers_change_no_byte() {
    let run = |recycle: bool| {
        let mut net = Net::new(true);
        net.recycle = recycle;
        net.trace = Some(Vec::new());
        net.run_to(ms(1_000));
        for i in 0..3 {
            let now = net.now;
            let c = ClientId { slot: 1, serial: 1 };
            // Without timers: a line at each renewal it needs.
            net.hosts[i]
                .handle_supervise(now, c, 0, Some(HBT), None, i == 0)
                .unwrap();
            net.hosts[i].flush(now).unwrap();
        }
        for round in 0..4u64 {
            net.run_to(ms(2_000 + 1_500 * round));
            // A handoff (each leader yields in turn): RESIGNs, rounds, votes, writes.
            let l = net.leader();
            let now = net.now;
            assert!(net.hosts[l].group_mut(0).node.handle_yield(now));
            net.hosts[l].flush(now).unwrap();
            // Every supervisor confirms what it was sent, so the RESIGN may leave.
            for i in 0..3 {
                let c = ClientId { slot: 1, serial: 1 };
                net.hosts[i].handle_released(c, u64::MAX >> 1).ok();
                net.hosts[i].flush(now).unwrap();
            }
        }
        net.run_to(ms(9_000));
        let states: Vec<String> = net
            .hosts
            .iter()
            .map(|h| format!("{:?} {:?}", h.state(), h.metrics()))
            .collect();
        (net.trace.take().unwrap(), states)
    };
    let (fresh, fresh_states) = run(false);
    let (recycled, recycled_states) = run(true);
    assert!(fresh.len() > 300, "too little traffic: {}", fresh.len());
    assert!(fresh.iter().any(|l| l.contains("Supervisor")), "no line");
    for (k, (a, b)) in fresh.iter().zip(&recycled).enumerate() {
        assert_eq!(a, b, "entry {k} differs");
    }
    assert_eq!(fresh.len(), recycled.len());
    assert_eq!(fresh_states, recycled_states);
}
