//! Queries of the machine, for the edges of the crate (the bindings), so
//! that the numerics take such limits as arguments instead of reading the
//! system themselves.

/// What [`available_memory_bytes`] assumes when the system does not say
/// (16 GiB, a modest machine).
pub const ASSUMED_MEMORY_BYTES: u64 = 16 << 30;

/// The memory available to new allocations, in bytes: `MemAvailable` of
/// `/proc/meminfo` on Linux (free memory plus reclaimable caches), else
/// [`ASSUMED_MEMORY_BYTES`]. E.g. the budget of
/// [`crate::gp::exact::check_exact_size`].
pub fn available_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(ASSUMED_MEMORY_BYTES, |kib| kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    #[test]
    fn some_memory_is_available() {
        assert!(super::available_memory_bytes() > 0);
    }
}
