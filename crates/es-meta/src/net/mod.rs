//! Raft RPCs and control requests between nodes, on their own TCP listener
//! (never the Kafka listener): the frame ([`frame`]), the messages
//! ([`rpc`]), the server that hands them to openraft and the control
//! handler ([`server`]), and openraft's network built on them ([`client`]).
//! The byte layout is described in `docs/raft-protocol.md`.

pub mod client;
pub mod frame;
pub mod rpc;
pub mod server;

pub use client::{Connection, NetError, Network};
pub use frame::{FrameError, Kind, FRAME_MAX};
pub use rpc::{Envelope, Refusal, Reply, Request};
pub use server::{serve, ControlHandler, MAX_CONNECTIONS};
