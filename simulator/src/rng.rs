//! The simulator's random numbers (dropout masks): one counter-based generator shared by the aclnn
//! and aclop kernels, so a mask depends only on (seed, offset, index).

/// Uniform [0, 1) from (seed, offset, i): splitmix64 of a counter (the simulator's generator).
pub(crate) fn uniform(seed: i64, offset: i64, i: usize) -> f64 {
    let mut z = (seed as u64) ^ (offset as u64).wrapping_add(i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}
