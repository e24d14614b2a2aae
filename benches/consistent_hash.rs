//! What the consistent-hash table of `src/selection/consistent_hash.rs` costs on its own,
//! measured with criterion: hashing a key, finding its home, building the table. A whole keyed
//! pick through the engine is measured by the pick bench (`keyed/{n}`).
//!
//! The module is compiled into this benchmark from its source file (it is internal to the
//! crate and needs nothing else from it). Groups (the full benchmark id is `group/parameter`):
//!
//! - `consistent_hash/key_hash/{16,64}`: hashing an affinity key of 16 and 64 bytes.
//! - `consistent_hash/home/{n}`: the key's home, for `n` = 100 and 10,000 members of weight 1;
//!   each iteration takes the next of 65,536 precomputed key hashes, so the reads spread over
//!   the whole table as real keys do.
//! - `consistent_hash/build/{n}`: building the table for `n` = 10, 100 and 10,000 members, as
//!   a change of the group does.
//!
//! ```text
//! cargo bench --bench consistent_hash
//! ```

// Only the table's own parts are measured here; the engine's keyed pick is in the pick bench.
#[allow(dead_code)]
#[path = "../src/selection/consistent_hash.rs"]
mod consistent_hash;

use std::hint::black_box;

use consistent_hash::{key_hash, HashRing};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// Member counts the lookups are measured at.
const SIZES: [usize; 2] = [100, 10_000];

fn ids(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.0.{}.{}:8080", i / 256, i % 256))
        .collect()
}

fn ring(ids: &[String]) -> HashRing {
    let members: Vec<(&str, f64)> = ids.iter().map(|id| (id.as_str(), 1.0)).collect();
    HashRing::new(&members)
}

fn key_hashes() -> Vec<u64> {
    (0..1 << 16)
        .map(|i| key_hash(format!("session-{i:08x}").as_bytes()))
        .collect()
}

fn bench_key_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("consistent_hash/key_hash");
    for len in [16, 64] {
        let key = vec![b'k'; len];
        group.bench_with_input(BenchmarkId::from_parameter(len), &key, |b, key| {
            b.iter(|| key_hash(black_box(key)));
        });
    }
    group.finish();
}

fn bench_home(c: &mut Criterion) {
    let keys = key_hashes();
    let mut group = c.benchmark_group("consistent_hash/home");
    for n in SIZES {
        let ring = ring(&ids(n));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            let mut next = 0usize;
            b.iter(|| {
                next = (next + 1) & 0xffff;
                ring.home(black_box(keys[next]))
            });
        });
    }
    group.finish();
}

fn bench_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("consistent_hash/build");
    group.sample_size(10);
    for n in [10, 100, 10_000] {
        let ids = ids(n);
        let members: Vec<(&str, f64)> = ids.iter().map(|id| (id.as_str(), 1.0)).collect();
        group.bench_with_input(BenchmarkId::from_parameter(n), &members, |b, members| {
            b.iter(|| HashRing::new(black_box(members)));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_key_hash, bench_home, bench_build);
criterion_main!(benches);
