//! electd: one leader among a fixed set of servers, with the term as fencing token.
//!
//! Architecture: a pure protocol core inside thin drivers.
//!
//! - [`wire`]: the datagram format (SPEC section 3), encode and decode.
//! - [`core`] (also reachable as `node`): the pure protocol, both machines of one
//!   server; inputs `handle_*` with `now`, outputs from `poll_output`, timers through
//!   `next_deadline`. No clock, socket, file or global RNG. Its [`elector`] holds the
//!   ELECTOR (SPEC section 5), its [`candidate`] the CANDIDATE (section 6).
//! - [`host`]: the pure shell around every group's core: the datagram path (decode,
//!   source check, replay window, fan-out), the flush (write before what waits for it,
//!   heartbeat alignment, bundling) and the write in flight; `handle_*(now)` in,
//!   `poll_transmit`/`poll_write`/`poll_event` out.
//! - [`daemon`]: the mio driver of the host: sockets, threads, signals, hooks, the
//!   control socket, and (for now) supervisors, health, stopping and the views.
//! - [`time`], [`rng`]: the core's notion of time and its seeded jitter.
//!
//! The daemon and the deterministic simulator (`tests/sim`) drive the same `Host`; see
//! `docs/ARCHITECTURE.md` for the rooms and `docs/PROTOCOL.md` for the protocol and
//! why it is safe.

pub mod access;
pub mod addr;
pub mod auth;
pub mod config;
pub mod conns;
pub mod control;
pub mod core;
/// electctl's commands: their requests on the control socket and how the answers print.
pub mod ctl;
pub mod daemon;
pub mod health;
pub mod hooks;
pub mod host;
pub mod http;
pub mod json;
pub mod logsink;
pub mod metrics;
pub mod notify;
pub mod rng;
pub mod store;
pub mod supervise;
pub mod time;
pub mod transport;
pub mod wire;

/// The protocol core under its earlier name (`electd::node::Node`).
pub use crate::core as node;
pub use crate::core::{candidate, elector};
