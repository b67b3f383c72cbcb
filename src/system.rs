//! Queries of the machine, for the edges of the crate (the bindings), so
//! that the numerics take such limits as arguments instead of reading the
//! system themselves.

/// What [`available_memory_bytes`] assumes when the system does not say
/// (16 GiB, a modest machine).
pub const ASSUMED_MEMORY_BYTES: u64 = 16 << 30;

/// The memory available to new allocations, in bytes: `MemAvailable` of
/// `/proc/meminfo` on Linux (free memory plus reclaimable caches), else
/// [`ASSUMED_MEMORY_BYTES`]; and no more than the address space the process
/// may still map under its `RLIMIT_AS` ([`address_space_headroom_bytes`]).
/// E.g. the budget of [`crate::gp::exact::check_exact_size`].
pub fn available_memory_bytes() -> u64 {
    let free = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| meminfo_available(&s))
        .unwrap_or(ASSUMED_MEMORY_BYTES);
    address_space_headroom_bytes().map_or(free, |h| free.min(h))
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

/// The address space the process may still map, in bytes, when it runs
/// under a soft `RLIMIT_AS` (`ulimit -v`): the limit of `/proc/self/limits`
/// less the `VmSize` of `/proc/self/status`. An allocation beyond it fails
/// whatever the free memory. `None` without a limit or off Linux.
pub fn address_space_headroom_bytes() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let limit = address_space_limit(&limits)?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(limit.saturating_sub(vm_size(&status).unwrap_or(0)))
}

/// The soft "Max address space" of a `/proc/self/limits` text, in bytes;
/// `None` when it is unlimited.
fn address_space_limit(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max address space"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse::<u64>().ok())
}

/// `VmSize` (the mapped address space) of a `/proc/self/status` text, in
/// bytes.
fn vm_size(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn some_memory_is_available() {
        assert!(available_memory_bytes() > 0);
    }

    #[test]
    fn address_space_limit_and_size_are_parsed() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max stack size            8388608              unlimited            bytes\n\
                      Max address space         4294967296           unlimited            bytes\n";
        assert_eq!(address_space_limit(limits), Some(4 << 30));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_limit(unlimited), None);
        let status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmSize:\t  819200 kB\n";
        assert_eq!(vm_size(status), Some(800 << 20));
        assert_eq!(
            meminfo_available("MemTotal: 100 kB\nMemAvailable:  2048 kB\n"),
            Some(2 << 20)
        );
    }
}
