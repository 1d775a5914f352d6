//! Host data for the benches that generate their own: a xorshift stream
//! of values in [-1, 1), the same on every run.

/// The stream's next value, from the fixed seed.
pub fn uniform() -> impl FnMut() -> f32 {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 2000) as f32 / 1000.0 - 1.0
    }
}
