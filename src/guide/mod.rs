//! The user's guide: one chapter per task, beyond the quick starts of the crate root.
//!
//! Each chapter is a module with no items, only documentation; every code block in it is a
//! doctest, compiled with and without the optional features it uses. The chapters are the
//! markdown files beside this one.
//!
//! - [Discovery](discovery): where destinations come from, the update guard, publishing from
//!   your own code, and one chapter per source: [DNS](discovery::dns),
//!   [a watched configuration file](discovery::config_file), [etcd](discovery::etcd),
//!   [Consul](discovery::consul), [Kubernetes](discovery::kubernetes).
//! - [Tiers and load balancing](tiers): health classes, strict failover between tiers, the
//!   load-balancing policies.
//! - [Health under faults](health): probes on their own schedule, warm-up, suspects, recovery,
//!   outlier detection; the service side's health payload and draining.
//! - [Timeouts, failures and retries](timeouts_and_failures): the wrapped client, its timeouts,
//!   what counts as a failure, retries, the retry budget and hedging.
//! - [Integrations](integrations): reqwest-middleware, tower, hyper and tonic, tracing spans,
//!   metrics, TOML and YAML.
//! - [Configuration reference](configuration): every key, its default, and where healthpick
//!   differs from YARP.
//! - [The command line](command_line): `healthpick check`, `watch` and `simulate`.
//! - [Performance](performance): what the benches measure and how to run them.

#[doc = include_str!("discovery.md")]
pub mod discovery {
    #[doc = include_str!("dns.md")]
    pub mod dns {}

    #[doc = include_str!("config_file.md")]
    pub mod config_file {}

    #[doc = include_str!("etcd.md")]
    pub mod etcd {}

    #[doc = include_str!("consul.md")]
    pub mod consul {}

    #[doc = include_str!("kubernetes.md")]
    pub mod kubernetes {}
}

#[doc = include_str!("tiers.md")]
pub mod tiers {}

#[doc = include_str!("health.md")]
pub mod health {}

#[doc = include_str!("timeouts_and_failures.md")]
pub mod timeouts_and_failures {}

#[doc = include_str!("integrations.md")]
pub mod integrations {}

#[doc = include_str!("configuration.md")]
pub mod configuration {}

#[doc = include_str!("command_line.md")]
pub mod command_line {}

#[doc = include_str!("performance.md")]
pub mod performance {}
