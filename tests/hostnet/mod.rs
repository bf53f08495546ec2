//! Hosts on a test's own perfect network (tests/host_registry.rs, tests/wire_upgrade.rs,
//! tests/rest_reads.rs, tests/allocs.rs): each test says how its outputs are carried
//! (`settle`); time runs the same way for all, and their three servers are configured
//! alike (`node_cfg`, `host_cfg`).

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use electd::host::{Host, HostConfig};
use electd::node::{NodeConfig, Sabotage, ServerInfo};
use electd::time::Time;
use std::time::Duration;

/// The heartbeat of these clusters.
pub const HBT: Duration = Duration::from_millis(100);

pub fn ms(v: u64) -> Time {
    Time(v * 1_000_000)
}

/// Server `id` of three (ids 1..=3): heartbeat HBT, rtt 20 ms, K 3, drift 1 %,
/// max-hold 60 s, no preempt-delay; server `preferred` (if any) has priority 9, the
/// others 0. Tests change what they need with struct update syntax.
pub fn node_cfg(id: u16, seed: u64, preferred: Option<u16>) -> NodeConfig {
    NodeConfig {
        id,
        servers: (1..=3)
            .map(|id| ServerInfo {
                id,
                priority: if Some(id) == preferred { 9 } else { 0 },
                witness: false,
            })
            .collect(),
        fingerprint: 0xF1F1,
        heartbeat: HBT,
        rtt: Duration::from_millis(20),
        missed_heartbeats: 3,
        drift_ppm: 10_000,
        max_hold: Duration::from_secs(60),
        preempt_delay: None,
        seed,
        strict: true,
        sabotage: Sabotage::default(),
    }
}

/// Host `id`'s configuration to go with `node_cfg`: any source, rtt 20 ms.
pub fn host_cfg(id: u16, several: bool) -> HostConfig {
    HostConfig {
        id,
        fingerprint: 0xF1F1,
        max_hold: Duration::from_secs(60),
        sources: None,
        unicast: true,
        several,
        rtt: Duration::from_millis(20),
    }
}

/// A few hosts and a clock; `run_to` fires each host's deadlines in order, carrying
/// every output after each step.
pub trait HostNet {
    fn hosts(&mut self) -> &mut [Host];
    fn now(&mut self) -> &mut Time;
    /// Carries every output until none is left.
    fn settle(&mut self);

    /// Host `i` wakes for its timers at the current time: what a test does first (read
    /// what waited in its socket: tests/waiting_flush.rs). Nothing by default.
    fn before_timeout(&mut self, _i: usize) {}

    /// Runs time forward to `until`, firing each host's deadlines in order.
    fn run_to(&mut self, until: Time) {
        self.settle();
        for _ in 0..1_000_000 {
            let now = *self.now();
            let Some(next) = self.hosts().iter().map(|h| h.next_deadline(now)).min() else {
                break;
            };
            let next = next.max(now);
            if next > until {
                break;
            }
            *self.now() = next;
            for i in 0..self.hosts().len() {
                if self.hosts()[i].next_deadline(next) <= next {
                    self.before_timeout(i);
                    self.hosts()[i].handle_timeout(next).unwrap();
                }
            }
            self.settle();
        }
        *self.now() = until;
    }
}
