//! A fixed-size bitset: which operations are already linearized.

/// One bit per operation of a partition. Hashable, so (bitset, state)
/// pairs can be memoized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Bitset(Box<[u64]>);

impl Bitset {
    /// All bits clear, room for `n` bits.
    pub(super) fn new(n: usize) -> Self {
        Bitset(vec![0; n.div_ceil(64)].into_boxed_slice())
    }

    pub(super) fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    pub(super) fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }

    #[cfg(test)]
    pub(super) fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// Encodes a [`Bitset`] compactly for the memo table, exactly (equal
/// encodings iff equal bitsets, given the same partition).
///
/// Ops are numbered in invocation order, so a linearized set is a dense
/// prefix ("everything before op k is linearized") plus a window of recent
/// ops; only `info` ops, which need never be linearized, leave holes in the
/// prefix. The encoding is `[j, s, (i, word_i) × s, words j..]`: `j` is the
/// first word that is not full once `info` bits count as set, the `s`
/// pairs are the earlier words with an `info` hole, and the tail is
/// trimmed of zero words. A memo entry then costs a few words instead of
/// one bit per op of the partition, which for 10,000 ops is 20× smaller.
pub(super) struct MemoKeys {
    /// Per word: bits that may be clear in the dense prefix (info ops and
    /// the padding past the last op).
    holes: Box<[u64]>,
    /// Per word: the padding bits past the last op.
    padding: Box<[u64]>,
}

impl MemoKeys {
    /// For `n` ops, of which `info` may stay unlinearized.
    pub(super) fn new(n: usize, info: impl Iterator<Item = usize>) -> Self {
        let words = n.div_ceil(64);
        let mut padding = vec![0u64; words];
        if !n.is_multiple_of(64) {
            padding[words - 1] = !0u64 << (n % 64);
        }
        let mut holes = padding.clone();
        for i in info {
            holes[i / 64] |= 1 << (i % 64);
        }
        MemoKeys {
            holes: holes.into_boxed_slice(),
            padding: padding.into_boxed_slice(),
        }
    }

    /// The compact, exact encoding of `b`.
    pub(super) fn encode(&self, b: &Bitset) -> Box<[u64]> {
        let w = &b.0;
        let j = (0..w.len())
            .find(|&i| w[i] | self.holes[i] != !0)
            .unwrap_or(w.len());
        let end = (j..w.len()).rev().find(|&i| w[i] != 0).map_or(j, |i| i + 1);
        let mut out = vec![j as u64, 0];
        for (i, &word) in w.iter().enumerate().take(j) {
            if word | self.padding[i] != !0 {
                out.push(i as u64);
                out.push(word);
                out[1] += 1;
            }
        }
        out.extend_from_slice(&w[j..end]);
        out.into_boxed_slice()
    }
}

/// FxHash-style hasher: the memo table hashes thousands of words per
/// second of search; SipHash's DoS resistance buys nothing here.
#[derive(Default, Clone, Copy)]
pub(super) struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// `BuildHasher` for [`FastHasher`].
pub(super) type FastBuild = std::hash::BuildHasherDefault<FastHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_keys_are_compact_and_exact() {
        // 200 ops, op 5 is info.
        let keys = MemoKeys::new(200, [5].into_iter());
        let mut a = Bitset::new(200);
        for i in 0..150 {
            if i != 5 {
                a.set(i);
            }
        }
        a.set(170);
        let ka = keys.encode(&a);
        // j = 2 (words 0 and 1 full but for the info hole), word 0 listed
        // as a hole, then words 2..=2.
        assert_eq!(ka.len(), 2 + 2 + 1);
        let mut b = a.clone();
        b.set(5);
        let kb = keys.encode(&b);
        assert_ne!(ka, kb);
        let mut c = Bitset::new(200);
        assert_eq!(&*keys.encode(&c), &[0, 0]);
        for i in 0..200 {
            c.set(i);
        }
        assert_eq!(&*keys.encode(&c), &[4, 0]);
        assert_ne!(keys.encode(&c), keys.encode(&b));
    }

    #[test]
    fn set_clear_get() {
        let mut b = Bitset::new(130);
        b.set(0);
        b.set(129);
        assert!(b.get(0) && b.get(129) && !b.get(64));
        b.clear(129);
        assert!(!b.get(129));
        assert_eq!(b, {
            let mut c = Bitset::new(130);
            c.set(0);
            c
        });
    }
}
