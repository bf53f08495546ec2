//! electd: one leader among a fixed set of servers, with the term as fencing token.
//!
//! Architecture: a pure protocol core per election group, a pure shell around all of
//! them (the host), and thin drivers that do the I/O: the mio daemon in production, the
//! deterministic simulator (`tests/sim`) in tests. See `docs/ARCHITECTURE.md` for the
//! rooms and `docs/PROTOCOL.md` for the protocol and why it is safe.
//!
//! The pure rooms (no clock, socket, file, thread or global RNG):
//! - [`wire`]: the datagram format (SPEC section 3): one body codec under two framings.
//! - [`core`] (also `node`): the protocol of one group; [`elector`] is the ELECTOR
//!   (SPEC section 5), [`candidate`] the CANDIDATE (section 6).
//! - [`host`]: every group's core and the rules around them: the datagram path, the
//!   flush, the write in flight, the supervisor registry and RESIGN release, health
//!   verdicts and stopping; `handle_*(now)` in, `poll_*` out.
//! - [`metrics`]: the Prometheus families as one table and their renderer.
//! - [`json`], [`time`], [`rng`]: the answers' JSON writer, the boot clock's time, seeded
//!   jitter.
//!
//! The drivers and their I/O:
//! - [`daemon`]: the mio loop that drives the host: sockets, signals, threads, hooks.
//! - [`transport`]: UDP, multicast or unicast fan-out; [`addr`]: addresses and names.
//! - [`control`]: the control socket's requests, limits and answers; [`http`]: the
//!   metrics listener; [`conns`]: the connection table both share.
//! - [`store`]: the state file; [`logsink`]: the non-blocking log writer; [`notify`]:
//!   sd_notify; [`hooks`]: on-leader and on-follower commands; [`health`]: the check
//!   runner and its pure fall/rise verdict.
//! - [`config`]: the file, its checks (`--check-config`) and defaults; [`auth`]: keys
//!   and the replay window; [`access`]: who may use the control socket.
//! - [`supervise`]: `electctl run`; [`ctl`]: electctl's other commands.

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
