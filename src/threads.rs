//! Thread control: the pool every Python-facing call runs in.
//!
//! Rust users keep full control: heavy routines take a [`Parallelism`]
//! argument and run in whatever rayon pool the caller is in. The Python
//! bindings run every call through [`install`], which uses a pool sized by
//! `RANDFEAT_NUM_THREADS` (default: all cores) or [`set_num_threads`].
//!
//! Fork safety: a forked child inherits the pool's bookkeeping but not its
//! threads, so work sent to it would wait forever. The pool remembers the
//! process id that built it; a call from another process (a fork child)
//! leaks the parent's pool, which is unusable there, and builds a new one.

use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};

/// How a routine may use threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Parallelism {
    /// Run on the calling thread only.
    Sequential,
    /// Split the work over the current rayon pool (the caller's
    /// `ThreadPool::install` scope, or rayon's global pool).
    #[default]
    Rayon,
}

impl Parallelism {
    /// True for [`Parallelism::Rayon`] when the current pool has more than one thread.
    pub fn is_parallel(self) -> bool {
        matches!(self, Parallelism::Rayon) && rayon::current_num_threads() > 1
    }
}

struct PoolEntry {
    pid: u32,
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
}

static POOL: Mutex<Option<PoolEntry>> = Mutex::new(None);
static REQUESTED: Mutex<Option<usize>> = Mutex::new(None);

/// Name of the environment variable that sizes the pool.
pub const NUM_THREADS_ENV: &str = "RANDFEAT_NUM_THREADS";

/// The default pool size, read once: `available_parallelism` reads cgroup
/// files on Linux, too slow for every call (it was most of a tiny call's cost).
fn default_threads() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    *DEFAULT.get_or_init(read_default_threads)
}

fn read_default_threads() -> usize {
    std::env::var(NUM_THREADS_ENV)
        .ok()
        .and_then(|v| parse_threads(&v))
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// A thread count as [`NUM_THREADS_ENV`] gives it: an integer from 1 to
/// [`max_num_threads`], blanks around it allowed.
fn parse_threads(v: &str) -> Option<usize> {
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=max_num_threads()).contains(n))
}

/// Why the default pool size ignores [`NUM_THREADS_ENV`], when it is set
/// to something other than a thread count (the pool then uses all cores):
/// the Python package warns with this message at import.
pub fn ignored_env_threads() -> Option<String> {
    let value = match std::env::var(NUM_THREADS_ENV) {
        Ok(v) if parse_threads(&v).is_none() => v,
        Err(std::env::VarError::NotUnicode(v)) => v.to_string_lossy().into_owned(),
        _ => return None,
    };
    Some(format!(
        "{NUM_THREADS_ENV}={value:?} is not a number of threads (an integer from 1 to {}); \
         using all cores",
        max_num_threads()
    ))
}

fn wanted_threads() -> usize {
    let requested = *REQUESTED.lock().unwrap_or_else(|e| e.into_inner());
    requested.unwrap_or_else(default_threads)
}

fn pool() -> Result<Arc<rayon::ThreadPool>> {
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let threads = wanted_threads();
    if let Some(entry) = guard.as_ref()
        && entry.pid == pid
        && entry.threads == threads
    {
        return Ok(Arc::clone(&entry.pool));
    }
    if let Some(old) = guard.take()
        && old.pid != pid
    {
        // Inherited through fork: its worker threads do not exist in this
        // process, so dropping it could wait on them. Leak it instead.
        std::mem::forget(old);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("randfeat-{i}"))
        .build()
        .map_err(|e| Error::ThreadPool(e.to_string()))?;
    let pool = Arc::new(pool);
    *guard = Some(PoolEntry {
        pid,
        threads,
        pool: Arc::clone(&pool),
    });
    Ok(pool)
}

/// The most threads a pool can have: 1,024, or rayon's limit
/// ([`rayon::max_num_threads`], 65535 on 64-bit targets) where it is lower.
/// The work is CPU-bound, so threads beyond the cores only share them, and
/// pools of tens of thousands of threads take minutes to start, during
/// which no Ctrl-C is seen.
pub fn max_num_threads() -> usize {
    rayon::max_num_threads().min(MAX_THREADS)
}

/// See [`max_num_threads`].
const MAX_THREADS: usize = 1024;

/// The error of a thread count outside `1..=`[`max_num_threads`], showing
/// `n` as the caller gave it.
pub(crate) fn invalid_thread_count(n: impl std::fmt::Display) -> Error {
    Error::invalid(
        "n",
        format!(
            "the number of threads must be between 1 and {}, got {n}",
            max_num_threads()
        ),
    )
}

/// Sets the number of threads used by [`install`] (and so by every Python
/// call). `n` must be between 1 and [`max_num_threads`].
pub fn set_num_threads(n: usize) -> Result<()> {
    if !(1..=max_num_threads()).contains(&n) {
        return Err(invalid_thread_count(n));
    }
    *REQUESTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(n);
    Ok(())
}

/// The number of threads [`install`] runs with.
pub fn get_num_threads() -> usize {
    wanted_threads()
}

/// Runs `f` inside the library's pool (see the module docs).
pub fn install<R, F>(f: F) -> Result<R>
where
    R: Send,
    F: FnOnce() -> R + Send,
{
    Ok(pool()?.install(f))
}

/// Runs `op` on the calling thread with a rayon scope whose spawned jobs
/// run in the library's pool (see [`install`]): the caller can wait for
/// them in its own way, e.g. in slices while it watches for Ctrl-C.
#[cfg(feature = "python")]
pub(crate) fn in_place_scope<'scope, R>(op: impl FnOnce(&rayon::Scope<'scope>) -> R) -> Result<R> {
    Ok(pool()?.in_place_scope(op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_runs_with_requested_threads() {
        set_num_threads(2).unwrap();
        assert_eq!(get_num_threads(), 2);
        let n = install(rayon::current_num_threads).unwrap();
        assert_eq!(n, 2);
        assert!(set_num_threads(0).is_err());
        let e = set_num_threads(max_num_threads() + 1).unwrap_err();
        assert!(e.to_string().contains("between 1 and"), "{e}");
        assert_eq!(get_num_threads(), 2);
    }

    #[test]
    fn the_environment_gives_a_count_from_1_to_the_limit() {
        assert_eq!(parse_threads(" 3\n"), Some(3));
        assert_eq!(
            parse_threads(&max_num_threads().to_string()),
            Some(max_num_threads())
        );
        for bad in ["", "0", "-1", "1.5", "abc", "2 threads"] {
            assert_eq!(parse_threads(bad), None, "{bad:?}");
        }
        assert_eq!(parse_threads(&(max_num_threads() + 1).to_string()), None);
    }
}
