//! electd
pub mod rng;
pub mod time;
pub mod wire;
