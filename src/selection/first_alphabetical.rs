//! `FirstAlphabetical`: the destination with the smallest id, compared case-insensitively.
//! Deterministic, for tests and for primary/standby setups. It scans the group.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{LoadBalancingPolicy, PickContext};
use crate::destination::Destination;

/// The smallest destination id, case-insensitively.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstAlphabetical;

fn cmp_ignore_case(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        // Byte-wise is ~10x faster than Unicode lower-casing, and the same for ASCII.
        return a
            .bytes()
            .map(|c| c.to_ascii_lowercase())
            .cmp(b.bytes().map(|c| c.to_ascii_lowercase()));
    }
    a.chars()
        .flat_map(char::to_lowercase)
        .cmp(b.chars().flat_map(char::to_lowercase))
}

impl LoadBalancingPolicy for FirstAlphabetical {
    fn pick(&self, _ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        let mut best = 0;
        for i in 1..group.len() {
            if cmp_ignore_case(&group[i].info.id, &group[best].info.id) == Ordering::Less {
                best = i;
            }
        }
        best
    }
}
