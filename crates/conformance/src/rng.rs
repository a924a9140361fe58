//! A small seeded xorshift generator: reproducible random inputs without a dependency. Every
//! test prints its seed; `CONFORMANCE_SEED` replays one.

/// xorshift64* — fast, good enough for test data, never for cryptography.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator from `seed` (0 is remapped, since xorshift would stay at 0 forever).
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The next 32 random bits (the high half, which is the better-mixed one).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `[lo, hi)`; `hi` must exceed `lo`.
    pub fn range_u32(&mut self, lo: u32, hi: u32) -> u32 {
        lo + ((u64::from(self.next_u32()) * u64::from(hi - lo)) >> 32) as u32
    }

    /// Uniform in `[lo, hi]` for signed values.
    pub fn range_i32(&mut self, lo: i32, hi: i32) -> i32 {
        let span = (i64::from(hi) - i64::from(lo) + 1) as u64;
        (i64::from(lo) + ((u64::from(self.next_u32()) * span) >> 32) as i64) as i32
    }

    /// Uniform in `[lo, hi)` with 24 random mantissa bits.
    pub fn range_f32(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// `n` values from `f`.
    pub fn vec<T>(&mut self, n: usize, mut f: impl FnMut(&mut Rng) -> T) -> Vec<T> {
        (0..n).map(|_| f(self)).collect()
    }
}

/// A fresh seed from the clock and a per-process counter, so each run and each call differ —
/// or exactly `CONFORMANCE_SEED` for every call when set, to replay a failure's inputs.
pub fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    if let Some(seed) = std::env::var("CONFORMANCE_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x1234_5678);
    nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_same_sequence_and_different_seeds_differ() {
        let a: Vec<u64> = Rng::new(7).vec(8, Rng::next_u64);
        let b: Vec<u64> = Rng::new(7).vec(8, Rng::next_u64);
        let c: Vec<u64> = Rng::new(8).vec(8, Rng::next_u64);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn ranges_stay_inside_their_bounds() {
        let mut rng = Rng::new(42);
        for _ in 0..10_000 {
            let u = rng.range_u32(3, 9);
            assert!((3..9).contains(&u));
            let i = rng.range_i32(-5, 5);
            assert!((-5..=5).contains(&i));
            let f = rng.range_f32(-1.0, 1.0);
            assert!((-1.0..1.0).contains(&f));
        }
    }

    #[test]
    fn zero_seed_does_not_stick_at_zero() {
        let mut rng = Rng::new(0);
        assert_ne!(rng.next_u64(), 0);
    }
}
