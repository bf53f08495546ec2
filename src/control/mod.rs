//! The control socket (SPEC sections 10 and 11): a Unix stream socket, one request word
//! per line, one JSON object per answer line.
//!
//! This module owns the clients and their limits; it turns bytes into `Request`s and
//! queues answers, and the daemon decides what to answer. Limits: requests up to 1 KiB,
//! at most 64 clients, at most `MAX_OUTBUF` bytes queued per client (a `watch` or
//! `supervise` client that stops reading is dropped, never waited for), idle clients
//! closed after `IDLE_TIMEOUT` (or at once, longest idle first, when a 65th client
//! arrives).
//!
//! Work per wakeup is bounded (issue 10, finding 7): at most `REQUESTS_PER_CLIENT`
//! requests of one client and `REQUESTS_PER_WAKEUP` in all are handed to the daemon per
//! wakeup, round-robin across clients; what is left stays buffered (at most
//! `INBUF_CAP` bytes per client, the rest stays in the kernel) and is served at the
//! next wakeup, which then does not wait on poll. A client whose answers pile up (more
//! than half of `MAX_OUTBUF` unwritten) is not served until it reads: backpressure
//! instead of a drop.
//!
//! Supervisors (`supervise`, SPEC section 6 Resign): the registry of what each was told
//! and confirmed is the host's (`crate::host::Registry`); this side marks the
//! connections that supervise (never evicted as idle), reports their departures
//! (`take_departed`) and delivers their numbered lines.
//!
//! Descriptors passed with `supervise` (`run`'s stop timers, issue 25) are bounded:
//! `MAX_PASSED` per request, one batch waiting per client, `MAX_PARKED` in the daemon;
//! those it does not keep are closed on the closer thread, never on the loop.
//!
//! The rooms: `request` parses request lines and writes error answers; `clients` is the
//! table of connections and its limits; `registry` marks supervisors and holds
//! answers; `passed` reads descriptors with their lines; `closer` closes them.

mod clients;
pub mod closer;
mod passed;
mod registry;
mod request;
#[cfg(test)]
mod tests;

pub use clients::{
    Control, ControlCounters, IDLE_TIMEOUT, MAX_ANSWER, MAX_CLIENTS, MAX_OUTBUF,
    REQUESTS_PER_CLIENT, REQUESTS_PER_WAKEUP, Scope,
};
pub use passed::{MAX_PARKED, MAX_PASSED, PassRefused, Passed, SCM_MAX_FD};
pub use registry::HeldReply;
pub use request::{
    MAX_HEALTH_REASON, MAX_REQUEST, NOT_LEADER, RELOAD_REFUSED, Request, connect_error, error_line,
    json_str, valid_group_name,
};
