//! electd: one leader among a fixed set of servers, with the term as fencing token.
//!
//! Architecture: a pure protocol core inside thin drivers.
//!
//! - [`wire`]: the datagram format (SPEC section 3), encode and decode.
//! - [`elector`]: the ELECTOR's slate and decision (SPEC section 5).
//! - [`candidate`]: the CANDIDATE's tally board, acknowledgements and lease (section 6).
//! - [`node`]: both machines of one server; inputs `handle_*` with `now`, outputs from
//!   `poll_output`, timers through `next_deadline`. No clock, socket, file or global RNG.
//! - [`time`], [`rng`]: the core's notion of time and its seeded jitter.
//!
//! The daemon (a mio loop) and the deterministic simulator (`tests/sim`) drive the same
//! `Node`; see `docs/PROTOCOL.md` for the protocol and why it is safe.

pub mod access;
pub mod addr;
pub mod auth;
pub mod candidate;
pub mod config;
pub mod control;
pub mod daemon;
pub mod elector;
pub mod health;
pub mod hooks;
pub mod http;
pub mod json;
pub mod node;
pub mod notify;
pub mod rng;
pub mod store;
pub mod supervise;
pub mod time;
pub mod transport;
pub mod wire;
