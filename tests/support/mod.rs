//! What the integration tests share: real servers and processes to talk to, clients, waits,
//! custom policies and log capture, one module each.
//!
//! Each test binary by area (`tests/<area>/main.rs`) declares this module with
//! `#[path = "../support/mod.rs"] mod support;`; the few tests that need a process of their own
//! (`tests/*.rs`) with `mod support;`, or include the one file they need by path (`logging.rs`).
//! The discovery harnesses (dnsmasq, etcd, the fake Kubernetes API server) are self-contained
//! files that the benches and examples include by path as well.
//!
//! Every server binds loopback and is shut down (listener and open connections) when dropped;
//! every process is ended by its own pid (or process group) when its handle is dropped.

#![allow(dead_code)] // each test binary uses part of it

#[path = "../../examples/support/backend.rs"]
pub mod backend;
pub mod child_backend;
pub mod clients;
pub mod consul;
pub mod dnsmasq;
pub mod etcd;
pub mod faces;
pub mod faulty_servers;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod logging;
pub mod policies;
pub mod servers;
pub mod status;
pub mod waits;
