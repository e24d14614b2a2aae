//! Discovery: the destination-set seam, the discovery core on a manual clock, and each source
//! against a real or fake server (dnsmasq, etcd, Consul, Kubernetes, a watched file), and the
//! faults independent checks found: half-applied reloads, sources that spin or block on a bad
//! entry, held changes and destination ids.

#[path = "../support/mod.rs"]
mod support;

mod destination_sets;
mod discovery_consul;
mod discovery_core;
mod discovery_dns;
mod discovery_etcd;
mod discovery_file;
mod discovery_kubernetes;
mod faults_entries;
mod faults_kubernetes;
mod faults_reload;
mod faults_sets;
mod faults_spin;
