//! Seeded randomness. Every random parameter of a feature map is drawn at fit
//! time from one ChaCha20 stream seeded by the user's `random_state`, so a
//! transform is a pure function of the fitted parameters.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// The generator used for every random parameter in the crate.
pub type Rng = ChaCha20Rng;

/// A generator seeded from `seed` (the Python `random_state`).
pub fn seeded(seed: u64) -> Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// An independent generator for sub-stream `stream` of `seed`: ChaCha's
/// stream id, so draws for different parts of a model (e.g. one sketch per
/// degree) do not depend on each other's sizes.
pub fn substream(seed: u64, stream: u64) -> Rng {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn same_seed_same_stream() {
        let a: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(seeded(7), |r, _: u64| Some(r.random()))
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(seeded(7), |r, _: u64| Some(r.random()))
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn substreams_differ() {
        let x: u64 = substream(7, 0).random();
        let y: u64 = substream(7, 1).random();
        assert_ne!(x, y);
    }
}
