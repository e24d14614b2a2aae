//! Consistent hashing with bounded loads: which destination of a group an affinity key goes to.
//!
//! A keyed pick must send a key to the same destination every time, in every process that sees
//! the same group, and keep doing so as the group changes around it: when a destination joins or
//! leaves, only the keys it gains or loses may move. A [`HashRing`] gives every key a stable
//! *preference order* over the group's members ([`HashRing::candidates`]); the first is the key's
//! home, and [`HashRing::pick`] takes the first one the caller accepts. The caller accepts a
//! member while it is available and under the load bound of [`LoadBound`], so no member takes
//! more than `c` times its share of the requests in flight and a key whose home is full goes to
//! its next choice: Mirrokni, Thorup and Zadimoghaddam's *consistent hashing with bounded loads*
//! (2016), which Google Cloud Pub/Sub, Vimeo's HAProxy (`hash-balance-factor`) and Envoy
//! (`hash_balance_factor`) use.
//!
//! # The algorithm: weighted rendezvous hashing over a table of slots
//!
//! The hash space is cut into 2^16 equal *slots*; a key's slot is the top 16 bits of its
//! [`key_hash`]. Each slot belongs to one member, chosen by **weighted rendezvous hashing**
//! (Thaler and Ravishankar's highest random weight, 1996; weighted by Schindelhauer and
//! Schomaker, 2005): every member draws a random score for the slot from a stream seeded by its
//! own id only, and the best score wins. The scores are an exponential race: each member drops
//! marks on random slots at a steady rate proportional to its weight (a splitmix64 stream seeded
//! by the hash of its id), and a slot goes to the member whose mark lands on it first. A slot
//! therefore goes to a member with a probability proportional to its weight, and its owner
//! depends only on which members are in the group and their weights: not on their order, the
//! process or the time.
//!
//! The table of owners is built once per change of the group, so a lookup is one hash of the key
//! and one read of a 256 KiB table, whatever the size of the group (Maglev's table, Eisenbud et
//! al., NSDI 2016, has the same lookup; Maglev fills its table in turns, which balances slots
//! exactly but moves more than the minimum when the group changes). A key's next choices are
//! the owners of the slots after its own, around the table, each member once: the walk along a
//! ring of Karger et al. (1997), with 2^16 arcs of equal length, which is what the bounded-load
//! paper forwards a full bin's keys along. Members that own no slot (a tiny weight, or more
//! members than slots) come last, in the order of their id's hash.
//!
//! What that gives, by construction:
//!
//! - **Minimal movement.** When a member leaves, only the slots it owned change hands (each to
//!   the next-best score, spread over the others by weight); when one joins, only the slots it
//!   wins. The keys that move are exactly the share of the member that left or joined: about
//!   1/n of them in a group of n equal members.
//! - **The same answer everywhere.** Hashes are XXH3 with fixed seeds and the race is plain
//!   integer and floating-point arithmetic, decided in the same way on every machine; there is
//!   no per-process seed. Ids are hashed ASCII-lowercased, as healthpick compares them.
//! - **Returning keys.** The table is a function of the group: a member that leaves and comes
//!   back gets back every slot it had.
//! - **Weights.** A member's expected share of the slots is its share of the weight; the spread
//!   around it is binomial over 2^16 slots, about 1.2% (one standard deviation, relative) for
//!   one of 10 equal members and about 40% for one of 10,000, where the load bound does the
//!   balancing.
//!
//! # Costs
//!
//! Building a table drops about 2^16 x (ln 2^16 + 2), some 860,000 marks, whatever the size of
//! the group, once per change of the group. A table takes 256 KiB, plus 12 bytes per member. A
//! lookup reads one word of the table; a key whose home is refused walks on through the next
//! slots, a sequential read, and allocates only past its eighth choice.

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Bits of a key's hash that choose its slot.
const SLOT_BITS: u32 = 16;

/// Slots in a table.
const SLOTS: usize = 1 << SLOT_BITS;

/// The seed of a member id's hash: a different one from the keys', so an id and a key that
/// happen to be the same string do not land together.
const MEMBER_SEED: u64 = 0x6865_616c_7468_7069;

/// The slot owner of a table cell not yet claimed while a table is built.
const UNCLAIMED: u32 = u32::MAX;

/// Members the small inline set of [`Candidates`] remembers before it takes a bitset.
const INLINE_SEEN: usize = 8;

/// The hash of an affinity key: XXH3-64 with seed 0, the same in every process and version.
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// The bounded-load rule for one pick: a member may take a new request while its count of
/// requests in flight is below `ceil(c x (total_in_flight + 1) x share)`, where `share` is its
/// share of the group's weight ([`HashRing::share`]) and `c` the balance factor (1.25 by
/// default, at least 1).
///
/// The `+ 1` counts the request being placed, so in an idle group every member may take one.
/// Since the bounds add up to at least `c x (total_in_flight + 1)`, more than the requests in
/// flight, some member is always under its bound: a pick that checks only the load never fails.
/// This is the paper's capacity `ceil((1 + epsilon) x m / n)` for `m` requests, weighted as
/// Envoy weights its `hash_balance_factor`. A member with no share may take nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LoadBound {
    /// `c x (total_in_flight + 1)`: a member's bound before its share.
    per_share: f64,
}

impl LoadBound {
    /// The bound of a pick made while `total_in_flight` requests of the group are in flight,
    /// with balance factor `c` (below 1, or NaN, counts as 1).
    pub(crate) fn new(c: f64, total_in_flight: usize) -> Self {
        // `max` also turns a NaN factor into 1.
        LoadBound {
            per_share: c.max(1.0) * (total_in_flight as f64 + 1.0),
        }
    }

    /// The most requests a member with `share` may have in flight after this pick.
    #[cfg(test)]
    pub(crate) fn limit(self, share: f64) -> usize {
        if share.is_nan() || share <= 0.0 {
            return 0;
        }
        // The float-to-integer cast saturates: an absurd factor means no bound, never a wrap.
        (self.per_share * share).ceil() as usize
    }

    /// Whether a member with `share` and `in_flight` requests may take this one: `in_flight`
    /// is below [`limit`](Self::limit). For a whole number, being below the rounded-up bound is
    /// being below the bound itself, so this needs no rounding.
    #[inline]
    pub(crate) fn admits(self, in_flight: usize, share: f64) -> bool {
        (in_flight as f64) < self.per_share * share
    }
}

/// A group's members laid out for keyed picks: for any key, the members in a stable preference
/// order. Built once per change of the group; a lookup only reads it.
#[derive(Clone)]
pub(crate) struct HashRing {
    /// The owner (member index) of each slot; `None` when no member is in the ring.
    owners: Option<Box<[u32; SLOTS]>>,
    /// Each member's share of the weight, by member index: 0 for a member not in the ring.
    shares: Box<[f64]>,
    /// The members in the ring, in the order of their seeds: the order after a full lap.
    by_seed: Box<[u32]>,
}

impl std::fmt::Debug for HashRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashRing")
            .field("members", &self.shares.len())
            .field("in_ring", &self.by_seed.len())
            .finish()
    }
}

impl HashRing {
    /// The ring of `members`, each an id and a weight, in the group's order: the indices that
    /// [`candidates`](Self::candidates) and [`pick`](Self::pick) return are positions in this
    /// slice.
    ///
    /// A member is in the ring when its weight is a positive finite number; any other weight
    /// (0, negative, NaN, infinite, or too small to be a normal float) leaves it out, and it is
    /// never a candidate. Ids are compared ASCII-case-insensitively. Two members with the same
    /// id are told apart by their order among themselves, so each still gets its share.
    pub(crate) fn new(members: &[(&str, f64)]) -> Self {
        // Indices are stored in 32 bits; a group cannot come near that.
        let members = &members[..members.len().min(UNCLAIMED as usize)];
        let n = members.len();
        let rates = rates(members);
        let total: f64 = rates.iter().sum();
        let shares: Box<[f64]> = rates
            .iter()
            .map(|&r| if r > 0.0 { r / total } else { 0.0 })
            .collect();
        let seeds = member_seeds(members);
        let mut by_seed: Vec<u32> = (0..n as u32)
            .filter(|&i| in_ring(members[i as usize].1))
            .collect();
        by_seed.sort_unstable_by_key(|&i| (seeds[i as usize], i));
        let owners = if by_seed.is_empty() {
            None
        } else {
            Some(race(&rates, &seeds, total))
        };
        HashRing {
            owners,
            shares,
            by_seed: by_seed.into_boxed_slice(),
        }
    }

    /// How many members the ring was built from, in the ring or not.
    pub(crate) fn len(&self) -> usize {
        self.shares.len()
    }

    /// Member `index`'s share of the weight of the members in the ring (0 for one left out), as
    /// [`LoadBound`] takes it.
    pub(crate) fn share(&self, index: usize) -> f64 {
        self.shares.get(index).copied().unwrap_or(0.0)
    }

    /// The key's home: the first of its [`candidates`](Self::candidates), if any.
    #[inline]
    pub(crate) fn home(&self, key_hash: u64) -> Option<usize> {
        let owners = self.owners.as_deref()?;
        Some(owners[slot_of(key_hash)] as usize)
    }

    /// The members in the key's stable preference order, each member in the ring once: first
    /// its home, then the owners of the slots after the key's, then the members that own no
    /// slot.
    pub(crate) fn candidates(&self, key_hash: u64) -> Candidates<'_> {
        Candidates {
            ring: self,
            slot: slot_of(key_hash),
            walked: 0,
            leftover: 0,
            found: 0,
            seen: Seen::default(),
        }
    }

    /// The first of the key's candidates that `accept` takes: the key's home when it is taken,
    /// else its next choices in order. `None` when `accept` refuses every member (or the ring
    /// is empty). `accept` is asked about each member at most once. The reference the tests
    /// hold keyed picks to.
    #[cfg(test)]
    pub(crate) fn pick(&self, key_hash: u64, accept: impl FnMut(usize) -> bool) -> Option<usize> {
        let mut accept = accept;
        self.candidates(key_hash).find(|&i| accept(i))
    }
}

/// Whether a member of this weight is in the ring: a positive, finite, normal float.
fn in_ring(weight: f64) -> bool {
    weight.is_normal() && weight > 0.0
}

/// The members' rates in the race: their weights divided by the power of two at or below the
/// heaviest (so the heaviest's rate is in [1, 2)), 0 for a member not in the ring. Huge weights
/// cannot overflow the sum, and since dividing by a power of two is exact, the race between two
/// members does not depend on who else is in the group.
fn rates(members: &[(&str, f64)]) -> Vec<f64> {
    let heaviest = members
        .iter()
        .map(|&(_, w)| w)
        .filter(|&w| in_ring(w))
        .fold(0.0f64, f64::max);
    let scale = f64::from_bits(heaviest.to_bits() & 0x7ff0_0000_0000_0000);
    members
        .iter()
        .map(|&(_, w)| if in_ring(w) { w / scale } else { 0.0 })
        .collect()
}

/// A key's candidates in preference order: see [`HashRing::candidates`].
pub(crate) struct Candidates<'a> {
    ring: &'a HashRing,
    /// The next slot to read.
    slot: usize,
    /// Slots read so far: a full lap is [`SLOTS`].
    walked: usize,
    /// After the lap, the position in `by_seed` to go on from.
    leftover: usize,
    /// Members returned so far.
    found: usize,
    seen: Seen,
}

impl Iterator for Candidates<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let ring = self.ring;
        if self.found == ring.by_seed.len() {
            return None;
        }
        if let Some(owners) = ring.owners.as_deref() {
            while self.walked < SLOTS {
                let member = owners[self.slot];
                self.slot = (self.slot + 1) % SLOTS;
                self.walked += 1;
                if self.seen.insert(member, ring.len()) {
                    self.found += 1;
                    return Some(member as usize);
                }
            }
        }
        while let Some(&member) = ring.by_seed.get(self.leftover) {
            self.leftover += 1;
            if self.seen.insert(member, ring.len()) {
                self.found += 1;
                return Some(member as usize);
            }
        }
        None
    }
}

/// The members a walk has returned: a few inline (a pick rarely goes past its first few
/// choices, and then allocates nothing), then a bitset over all members.
#[derive(Default)]
struct Seen {
    inline: [u32; INLINE_SEEN],
    len: usize,
    bits: Option<Vec<u64>>,
}

impl Seen {
    /// Records `member` (of `members`); false when it was already recorded.
    fn insert(&mut self, member: u32, members: usize) -> bool {
        if let Some(bits) = &mut self.bits {
            let (word, bit) = (member as usize / 64, 1u64 << (member % 64));
            let new = bits[word] & bit == 0;
            bits[word] |= bit;
            return new;
        }
        if self.inline[..self.len].contains(&member) {
            return false;
        }
        if self.len < INLINE_SEEN {
            self.inline[self.len] = member;
            self.len += 1;
            return true;
        }
        let mut bits = vec![0u64; members.div_ceil(64)];
        for &m in self.inline.iter().chain([&member]) {
            bits[m as usize / 64] |= 1 << (m % 64);
        }
        self.bits = Some(bits);
        true
    }
}

/// The slot of a key's hash: its top bits.
#[inline(always)]
fn slot_of(key_hash: u64) -> usize {
    (key_hash >> (64 - SLOT_BITS)) as usize
}

/// Each member's seed: the hash of its ASCII-lowercased id; a repeated id is hashed again with
/// its occurrence number until it is unique, so duplicates are distinct members.
fn member_seeds(members: &[(&str, f64)]) -> Vec<u64> {
    let mut taken = std::collections::HashSet::with_capacity(members.len());
    let mut lower = Vec::new();
    members
        .iter()
        .map(|&(id, _)| {
            lower.clear();
            lower.extend(id.bytes().map(|b| b.to_ascii_lowercase()));
            let mut seed = xxh3_64_with_seed(&lower, MEMBER_SEED);
            let mut occurrence = 0u64;
            while !taken.insert(seed) {
                occurrence += 1;
                seed = xxh3_64_with_seed(&occurrence.to_le_bytes(), seed);
            }
            seed
        })
        .collect()
}

/// The splitmix64 output function (Steele, Lea and Flood, 2014): a bijection on 64 bits that
/// scatters consecutive inputs.
#[inline(always)]
fn splitmix(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Mark `k` of a member with seed `seed`: its slot and its fraction of a time step, in [0, 1).
#[inline(always)]
fn mark(seed: u64, k: u64) -> (usize, f64) {
    let x = splitmix(seed.wrapping_add(k.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    let fraction = (x & 0xffff_ffff) as f64 * (1.0 / 4_294_967_296.0);
    (slot_of(x), fraction)
}

/// Runs the race: member `i` drops mark `k` at time `(k + fraction) / rates[i]` on the mark's
/// slot, and each slot goes to the member whose mark lands there first (ties, which need equal
/// times to the last bit, to the smaller seed).
///
/// Marks are dropped up to a horizon, and a little past it; a slot whose first mark came by the
/// horizon is decided, since every mark not yet dropped comes later. The horizon grows until
/// every slot is decided. The result is therefore the same whatever the horizons were, and so
/// whatever order the members came in.
fn race(rates: &[f64], seeds: &[u64], total: f64) -> Box<[u32; SLOTS]> {
    let mut first = vec![f64::INFINITY; SLOTS];
    let mut owners = vec![UNCLAIMED; SLOTS];
    let mut next_mark = vec![0u64; rates.len()];
    let slots = SLOTS as f64;
    // With marks landing at `total` per unit of time, a slot is still empty at time `h` with
    // probability about exp(-h total / SLOTS): this first horizon leaves about 0.14 of a slot
    // undecided, and each step after it divides that by e.
    let mut horizon = slots * (slots.ln() + 2.0) / total;
    let step = slots / total;
    loop {
        for (i, (&rate, &seed)) in rates.iter().zip(seeds).enumerate() {
            if rate <= 0.0 {
                continue;
            }
            let step_time = 1.0 / rate;
            // Every mark that can land by the horizon and at least one more: a mark not dropped
            // lands more than half a time unit after the horizon (rates are below 2), a margin
            // no rounding comes near.
            let last = horizon * rate + 1.0;
            let mut k = next_mark[i];
            while (k as f64) <= last {
                let (slot, fraction) = mark(seed, k);
                let time = (k as f64 + fraction) * step_time;
                let best = first[slot];
                if time < best
                    || (time == best
                        && owners[slot] != UNCLAIMED
                        && seed < seeds[owners[slot] as usize])
                {
                    first[slot] = time;
                    owners[slot] = i as u32;
                }
                k += 1;
            }
            next_mark[i] = k;
        }
        if first.iter().all(|&t| t <= horizon) {
            break;
        }
        horizon += step;
    }
    owners
        .into_boxed_slice()
        .try_into()
        .expect("the table has SLOTS cells")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` members of weight 1, `dest-0` to `dest-{n-1}`.
    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("dest-{i}")).collect()
    }

    fn equal(ids: &[String]) -> Vec<(&str, f64)> {
        ids.iter().map(|id| (id.as_str(), 1.0)).collect()
    }

    /// The hashes of `count` distinct keys.
    fn keys(count: usize) -> Vec<u64> {
        (0..count)
            .map(|i| key_hash(format!("key-{i}").as_bytes()))
            .collect()
    }

    /// Each key's home, as a member id.
    fn homes<'a>(members: &[(&'a str, f64)], keys: &[u64]) -> Vec<&'a str> {
        let ring = HashRing::new(members);
        keys.iter()
            .map(|&k| members[ring.home(k).unwrap()].0)
            .collect()
    }

    /// The fraction of keys whose home differs between two mappings.
    fn moved(before: &[&str], after: &[&str]) -> f64 {
        let moved = before.iter().zip(after).filter(|(a, b)| a != b).count();
        moved as f64 / before.len() as f64
    }

    #[test]
    fn removing_any_one_of_ten_moves_only_its_keys() {
        let ids = ids(10);
        let keys = keys(1_000_000);
        let all = homes(&equal(&ids), &keys);
        for (gone, id) in ids.iter().enumerate() {
            let mut rest = equal(&ids);
            rest.remove(gone);
            let after = homes(&rest, &keys);
            let fraction = moved(&all, &after);
            assert!(
                fraction <= 0.105,
                "removing {id} moved {fraction:.4} of the keys"
            );
            // Minimal: exactly the removed member's keys moved.
            for (before, after) in all.iter().zip(&after) {
                assert_eq!(
                    before != after,
                    before == id,
                    "{before} -> {after} removing {id}"
                );
            }
        }
    }

    #[test]
    fn adding_an_eleventh_moves_only_the_keys_it_takes() {
        let ids = ids(11);
        let keys = keys(1_000_000);
        let all = homes(&equal(&ids), &keys);
        // Each of the eleven in turn is the one added to the other ten.
        for (added, id) in ids.iter().enumerate() {
            let mut before = equal(&ids);
            before.remove(added);
            let before = homes(&before, &keys);
            let fraction = moved(&before, &all);
            assert!(
                fraction <= 0.095,
                "adding {id} moved {fraction:.4} of the keys"
            );
            for (b, a) in before.iter().zip(&all) {
                assert_eq!(b != a, a == id, "{b} -> {a} adding {id}");
            }
        }
    }

    #[test]
    fn a_member_that_leaves_and_comes_back_gets_its_keys_back() {
        let ids = ids(10);
        let keys = keys(200_000);
        let members = equal(&ids);
        let all = homes(&members, &keys);
        for gone in 0..ids.len() {
            let mut rest = members.clone();
            let member = rest.remove(gone);
            let _without = HashRing::new(&rest);
            rest.insert(gone, member);
            // Same set, same mapping: every key, not only 99% of them.
            assert_eq!(homes(&rest, &keys), all);
        }
    }

    #[test]
    fn the_order_of_the_members_and_the_case_of_their_ids_do_not_matter() {
        let ids = ids(7);
        let keys = keys(50_000);
        let members: Vec<(&str, f64)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), 1.0 + i as f64))
            .collect();
        let reference = homes(&members, &keys);
        let shouting: Vec<String> = ids.iter().map(|id| id.to_ascii_uppercase()).collect();
        let reversed: Vec<(&str, f64)> = shouting
            .iter()
            .zip(&members)
            .map(|(id, &(_, w))| (id.as_str(), w))
            .rev()
            .collect();
        let lowered: Vec<String> = homes(&reversed, &keys)
            .iter()
            .map(|id| id.to_ascii_lowercase())
            .collect();
        assert_eq!(lowered, reference);
    }

    #[test]
    fn shares_follow_the_weights() {
        let ids = ids(5);
        let weights = [1.0, 2.0, 3.0, 4.0, 10.0];
        let members: Vec<(&str, f64)> = ids
            .iter()
            .zip(weights)
            .map(|(id, w)| (id.as_str(), w))
            .collect();
        let ring = HashRing::new(&members);
        let keys = keys(1_000_000);
        let mut counts = [0usize; 5];
        for &k in &keys {
            counts[ring.home(k).unwrap()] += 1;
        }
        let total: f64 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let expected = w / total;
            assert_eq!(ring.share(i), expected);
            let got = counts[i] as f64 / keys.len() as f64;
            // Within 5% of the expected share (relative): about four binomial deviations
            // for the lightest member's 3,300 slots.
            assert!(
                (got / expected - 1.0).abs() < 0.05,
                "member {i}: {got:.4}, expected {expected:.4}"
            );
        }
    }

    #[test]
    fn weighted_groups_move_only_the_changed_members_keys_too() {
        // The heaviest member sets the scale of every rate: leaving or joining, it still moves
        // only its own keys.
        let ids = ids(6);
        let weights = [1.0, 2.5, 3.0, 0.7, 7.3, 100.9];
        let members: Vec<(&str, f64)> = ids
            .iter()
            .zip(weights)
            .map(|(id, w)| (id.as_str(), w))
            .collect();
        let keys = keys(200_000);
        let all = homes(&members, &keys);
        for changed in [5, 4, 0] {
            let mut rest = members.clone();
            rest.remove(changed);
            let without = homes(&rest, &keys);
            for (with, without) in all.iter().zip(&without) {
                assert_eq!(with != without, *with == ids[changed], "{with} / {without}");
            }
        }
    }

    #[test]
    fn known_answers() {
        // Any change of the key hash, the member seeds or the race changes these, and with
        // them where every existing key goes: such a change must be deliberate. The first is
        // XXH3-64's published answer for the empty input.
        assert_eq!(key_hash(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(key_hash(b"user-42"), KNOWN_USER_42);
        let ids = ["eu-1", "eu-2", "us-1", "us-2", "ap-1"];
        let members: Vec<(&str, f64)> = ids.iter().map(|&id| (id, 1.0)).collect();
        let ring = HashRing::new(&members);
        let answers: Vec<(&str, &str)> =
            ["alice", "bob", "carol", "dave", "user-42", "session-9f3a"]
                .iter()
                .map(|&key| (key, ids[ring.home(key_hash(key.as_bytes())).unwrap()]))
                .collect();
        assert_eq!(answers, KNOWN_HOMES);
        let order: Vec<&str> = ring
            .candidates(key_hash(b"alice"))
            .map(|i| ids[i])
            .collect();
        assert_eq!(order, KNOWN_ORDER);
    }

    const KNOWN_USER_42: u64 = 0x50fe_4b21_cf7b_09cd;
    const KNOWN_HOMES: [(&str, &str); 6] = [
        ("alice", "eu-1"),
        ("bob", "eu-1"),
        ("carol", "ap-1"),
        ("dave", "us-1"),
        ("user-42", "eu-2"),
        ("session-9f3a", "eu-1"),
    ];
    const KNOWN_ORDER: [&str; 5] = ["eu-1", "us-1", "ap-1", "eu-2", "us-2"];

    #[test]
    fn empty_rings_have_no_candidates() {
        let zero = [
            ("a", 0.0),
            ("b", -1.0),
            ("c", f64::NAN),
            ("d", f64::INFINITY),
        ];
        for members in [&[][..], &zero[..]] {
            let ring = HashRing::new(members);
            assert_eq!(ring.len(), members.len());
            for k in keys(100) {
                assert_eq!(ring.home(k), None);
                assert_eq!(ring.candidates(k).next(), None);
                assert_eq!(ring.pick(k, |_| true), None);
            }
        }
    }

    #[test]
    fn one_member_takes_every_key() {
        let ring = HashRing::new(&[("only", 3.0)]);
        for k in keys(1000) {
            assert_eq!(ring.candidates(k).collect::<Vec<_>>(), [0]);
            assert_eq!(ring.pick(k, |_| true), Some(0));
            assert_eq!(ring.pick(k, |_| false), None);
        }
    }

    #[test]
    fn members_left_out_are_never_candidates() {
        let members = [
            ("a", 1.0),
            ("b", 0.0),
            ("c", 2.0),
            ("d", f64::NAN),
            ("e", -3.0),
        ];
        let ring = HashRing::new(&members);
        assert_eq!(
            (ring.share(1), ring.share(3), ring.share(4), ring.share(9)),
            (0.0, 0.0, 0.0, 0.0)
        );
        for k in keys(1000) {
            let mut order: Vec<usize> = ring.candidates(k).collect();
            order.sort_unstable();
            assert_eq!(order, [0, 2]);
        }
    }

    #[test]
    fn duplicate_ids_are_distinct_members() {
        let members = [("same", 1.0), ("SAME", 1.0), ("other", 1.0)];
        let ring = HashRing::new(&members);
        let mut counts = [0usize; 3];
        for k in keys(30_000) {
            counts[ring.home(k).unwrap()] += 1;
            assert_eq!(ring.candidates(k).count(), 3);
        }
        for count in counts {
            assert!((8_000..12_000).contains(&count), "{counts:?}");
        }
    }

    #[test]
    fn huge_and_tiny_weights_keep_their_proportions() {
        let ring = HashRing::new(&[("a", f64::MAX), ("b", f64::MAX), ("c", 1.0)]);
        assert_eq!((ring.share(0), ring.share(1)), (0.5, 0.5));
        assert!(ring.share(2) < 1e-300);
        let mut counts = [0usize; 3];
        for k in keys(10_000) {
            counts[ring.home(k).unwrap()] += 1;
        }
        assert_eq!(counts[2], 0, "{counts:?}");
        assert!(counts[0] > 4_500 && counts[1] > 4_500, "{counts:?}");
        // The featherweight is still the last resort.
        for k in keys(10) {
            assert_eq!(ring.pick(k, |i| i == 2), Some(2));
        }
        let ring = HashRing::new(&[("a", 1e-300), ("b", 3e-300)]);
        assert_eq!((ring.share(0), ring.share(1)), (0.25, 0.75));
    }

    #[test]
    fn the_walk_past_eight_members_allocates_a_bitset_and_still_returns_each_once() {
        let ids = ids(300);
        let ring = HashRing::new(&equal(&ids));
        for k in keys(20) {
            let order: Vec<usize> = ring.candidates(k).collect();
            assert_eq!(order.len(), 300);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 300);
            // Refusing everyone but the last candidate walks the whole order to it.
            let last = *order.last().unwrap();
            let mut asked = 0;
            assert_eq!(
                ring.pick(k, |i| {
                    asked += 1;
                    i == last
                }),
                Some(last)
            );
            assert_eq!(asked, 300);
        }
    }

    #[test]
    fn load_bounds() {
        let limit = |c, total, share| LoadBound::new(c, total).limit(share);
        // An idle group: every member may take one.
        assert_eq!(limit(1.25, 0, 0.1), 1);
        assert_eq!(limit(1.25, 99, 0.1), 13);
        assert_eq!(limit(1.25, 999, 0.5), 625);
        // No share, nothing; a factor under 1 (or NaN) counts as 1.
        assert_eq!(limit(1.25, 50, 0.0), 0);
        assert_eq!(limit(1.25, 50, f64::NAN), 0);
        assert_eq!(limit(0.5, 99, 0.1), 10);
        assert_eq!(limit(f64::NAN, 99, 0.1), 10);
        assert_eq!(limit(f64::INFINITY, 99, 0.1), usize::MAX);
        let bound = LoadBound::new(1.25, 99);
        assert!(bound.admits(12, 0.1) && !bound.admits(13, 0.1));
        assert!(!bound.admits(0, 0.0) && !bound.admits(0, f64::NAN));
    }

    /// Zipf(s) over `keys` distinct keys: `requests` key indices from a seeded generator.
    fn zipf(s: f64, keys: usize, requests: usize, seed: u64) -> Vec<usize> {
        let mut cumulative = Vec::with_capacity(keys);
        let mut sum = 0.0;
        for rank in 1..=keys {
            sum += (rank as f64).powf(-s);
            cumulative.push(sum);
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..requests)
            .map(|_| {
                let u = rng.f64() * sum;
                cumulative.partition_point(|&c| c < u).min(keys - 1)
            })
            .collect()
    }

    /// Places every request of `stream` (key indices) and holds it; `c` = None places each at
    /// its home. Returns the loads and how many requests went to their home.
    fn place(
        ring: &HashRing,
        key_hashes: &[u64],
        stream: &[usize],
        c: Option<f64>,
    ) -> (Vec<usize>, usize) {
        let mut loads = vec![0usize; ring.len()];
        let mut at_home = 0;
        // `total`: the requests in flight, all held so far.
        for (total, &key) in stream.iter().enumerate() {
            let k = key_hashes[key];
            let chosen = ring
                .pick(k, |i| {
                    c.is_none_or(|c| LoadBound::new(c, total).admits(loads[i], ring.share(i)))
                })
                .unwrap();
            at_home += usize::from(Some(chosen) == ring.home(k));
            loads[chosen] += 1;
        }
        (loads, at_home)
    }

    #[test]
    fn zipf_keys_stay_within_the_bound() {
        let ids = ids(10);
        let ring = HashRing::new(&equal(&ids));
        let key_hashes = keys(10_000);
        let stream = zipf(1.1, 10_000, 100_000, 7);
        let ratio = |loads: &[usize]| {
            let max = *loads.iter().max().unwrap() as f64;
            max / (loads.iter().sum::<usize>() as f64 / loads.len() as f64)
        };
        // Without the bound the hottest keys pile onto their homes.
        let (unbounded, _) = place(&ring, &key_hashes, &stream, None);
        assert!(ratio(&unbounded) > 1.4, "{unbounded:?}");
        let (loads, at_home) = place(&ring, &key_hashes, &stream, Some(1.25));
        assert!(ratio(&loads) <= 1.27, "{loads:?}");
        // ... and most requests still go to their key's home.
        assert!(at_home > 80_000, "{at_home} of 100,000 at home");
    }

    #[test]
    fn bounded_weighted_loads_follow_the_weights() {
        let ids = ids(4);
        let weights = [1.0, 1.0, 2.0, 4.0];
        let members: Vec<(&str, f64)> = ids
            .iter()
            .zip(weights)
            .map(|(id, w)| (id.as_str(), w))
            .collect();
        let ring = HashRing::new(&members);
        let key_hashes = keys(1_000);
        let stream = zipf(1.1, 1_000, 40_000, 11);
        let (loads, _) = place(&ring, &key_hashes, &stream, Some(1.25));
        for (i, &load) in loads.iter().enumerate() {
            let bound = (1.25 * 40_000.0 * ring.share(i)).ceil() as usize;
            assert!(load <= bound, "member {i}: {load} > {bound} ({loads:?})");
        }
    }

    proptest::proptest! {
        /// Any group: the candidates are the members in the ring, each once, the home first,
        /// and a pick is the first candidate accepted.
        #[test]
        fn candidates_are_each_member_once_and_pick_takes_the_first_accepted(
            weights in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(0.0),
                    proptest::strategy::Just(1.0),
                    0.001f64..100.0,
                ],
                0..24,
            ),
            key in proptest::num::u64::ANY,
            refused in proptest::collection::vec(proptest::bool::ANY, 24),
        ) {
            let ids = ids(weights.len());
            let members: Vec<(&str, f64)> =
                ids.iter().zip(&weights).map(|(id, &w)| (id.as_str(), w)).collect();
            let ring = HashRing::new(&members);
            let order: Vec<usize> = ring.candidates(key).collect();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            let in_ring: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0.0).collect();
            proptest::prop_assert_eq!(sorted, in_ring);
            proptest::prop_assert_eq!(order.first().copied(), ring.home(key));
            let mut asked = Vec::new();
            let picked = ring.pick(key, |i| { asked.push(i); !refused[i] });
            let expected = order.iter().copied().find(|&i| !refused[i]);
            proptest::prop_assert_eq!(picked, expected);
            let asked_expected: Vec<usize> = match expected {
                Some(p) => order.iter().copied().take_while(|&i| i != p).chain([p]).collect(),
                None => order.clone(),
            };
            proptest::prop_assert_eq!(asked, asked_expected);
        }

        /// Rates keep the weights' ratios to the last bit, so who wins a slot between two
        /// members does not depend on the others.
        #[test]
        fn rates_are_the_weights_scaled_exactly(
            base in proptest::prop_oneof![1e-200f64..1e-100, 0.1f64..10.0, 1e100f64..1e200],
            factors in proptest::collection::vec(1e-3f64..1e3, 1..8),
        ) {
            let weights: Vec<f64> = factors.iter().map(|f| f * base).collect();
            let members: Vec<(&str, f64)> = weights.iter().map(|&w| ("m", w)).collect();
            let rates = rates(&members);
            let top = rates.iter().copied().fold(0.0f64, f64::max);
            proptest::prop_assert!((1.0..2.0).contains(&top), "{}", top);
            for (i, &wi) in weights.iter().enumerate() {
                for (j, &wj) in weights.iter().enumerate() {
                    proptest::prop_assert_eq!(rates[i] / rates[j], wi / wj, "{} {}", i, j);
                }
            }
        }

        /// Whatever the loads, some member is under its bound: a pick that checks only the
        /// load never fails. And admitting is being below the limit.
        #[test]
        fn the_bound_always_leaves_room(
            weights in proptest::collection::vec(0.01f64..10.0, 1..12),
            loads in proptest::collection::vec(0usize..1000, 12),
            c in 1.0f64..3.0,
        ) {
            let n = weights.len();
            let sum: f64 = weights.iter().sum();
            let shares: Vec<f64> = weights.iter().map(|w| w / sum).collect();
            let loads = &loads[..n];
            let bound = LoadBound::new(c, loads.iter().sum::<usize>());
            for (&load, &share) in loads.iter().zip(&shares) {
                proptest::prop_assert_eq!(bound.admits(load, share), load < bound.limit(share));
            }
            let room = (0..n).filter(|&i| bound.admits(loads[i], shares[i])).count();
            proptest::prop_assert!(room > 0, "{:?} {:?}", loads, shares);
        }
    }
}
