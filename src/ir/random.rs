//! The counter-based generator behind in-graph random ops (`Op::RandomUniform`):
//! op semantics that both backends implement.
//!
//! Element `i` of a random tensor is a pure function of `(seed, i)`, built
//! from 32-bit integer multiply, xor and shift, so the reference backend
//! and the StableHLO lowering produce the same bits.

/// A 32-bit avalanche hash (Chris Wellons' "lowbias32").
pub(crate) fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// 32 random bits for element `i` under `seed`.
pub(crate) fn bits(seed: i64, i: u32) -> u32 {
    let s = mix32((seed as u32) ^ mix32((seed >> 32) as u32));
    mix32(i.wrapping_mul(0x9e37_79b9) ^ s)
}

/// Uniform in `[0, 1)` with 24 random bits (exact in f32).
pub(crate) fn uniform(seed: i64, i: u32) -> f64 {
    (bits(seed, i) >> 8) as f64 / (1u32 << 24) as f64
}
