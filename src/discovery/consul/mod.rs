//! Discovery from Consul (feature `consul`): the instances of a service from the
//! agent's health endpoint, kept current with blocking queries, over plain reqwest and
//! serde_json (no Consul crate is kept well enough to depend on).

mod entries;
pub(crate) mod source;

pub use entries::{parse_entries, EntryError};
pub use source::ConsulSource;
