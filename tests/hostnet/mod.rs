//! Hosts on a test's own perfect network (tests/host_registry.rs, tests/wire_upgrade.rs):
//! each test says how its outputs are carried (`settle`); time runs the same way for all.

use electd::host::Host;
use electd::time::Time;

/// A few hosts and a clock; `run_to` fires each host's deadlines in order, carrying
/// every output after each step.
pub trait HostNet {
    fn hosts(&mut self) -> &mut [Host];
    fn now(&mut self) -> &mut Time;
    /// Carries every output until none is left.
    fn settle(&mut self);

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
            for h in self.hosts().iter_mut() {
                if h.next_deadline(next) <= next {
                    h.handle_timeout(next).unwrap();
                }
            }
            self.settle();
        }
        *self.now() = until;
    }
}
