//! Clients: the wrapped client and the middleware against real servers and child processes,
//! the client's public API, and the tower layer and discovery stream (with tonic); keyed calls
//! and load reports through all three.

#[path = "../support/mod.rs"]
mod support;

mod affinity;
mod client;
mod client_api;
mod load_reports;
mod tower;
mod tower_tonic;
