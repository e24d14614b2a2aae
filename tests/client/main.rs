//! Clients: the wrapped client and the middleware against real servers and child processes,
//! the client's public API, and the tower layer and discovery stream (with tonic).

#[path = "../support/mod.rs"]
mod support;

mod client;
mod client_api;
mod tower;
mod tower_tonic;
