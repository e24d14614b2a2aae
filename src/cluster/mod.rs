//! One cluster at run time: its settings with every policy resolved, and the
//! immutable snapshot that every reader loads.

pub(crate) mod settings;
pub(crate) mod snapshot;
