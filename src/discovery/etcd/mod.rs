//! Discovery from etcd (feature `etcd`): every key under a cluster's prefix is one
//! destination whose value is a YARP destination object, read through etcd's JSON gateway —
//! `kv/range`, then a watch from the next revision — with plain reqwest, no gRPC stack.
//! Instances register themselves with [`EtcdRegistration`](crate::service::EtcdRegistration)
//! under a lease, so a crashed one leaves when its lease runs out.

pub(crate) mod gateway;
pub(crate) mod source;
mod value;

pub use gateway::EtcdError;
pub use source::EtcdSource;
pub use value::{parse_value, ValueError};
