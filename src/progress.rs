//! Progress reports and cancellation of long routines.
//!
//! Every long routine (the Maclaurin allocation, the clustering and the
//! centroid fits of the localized GP, the exact GP's hyperparameter fit)
//! takes a [`Monitor`] by reference. The routine records what it is doing (a
//! stage with done/total counters, and messages such as one optimizer run's
//! summary) and calls [`Monitor::check`] between pieces of work that each
//! take well under half a second; once [`Monitor::cancel`] has been called
//! (from any thread), `check` returns [`Error::Interrupted`] and the routine
//! returns that error. A monitor never prints: its owner (the Python
//! bindings, or a Rust application) reads [`Monitor::snapshot`] and
//! [`Monitor::take_messages`] from another thread and shows them as it likes.
//!
//! ```
//! use randfeat_rs::progress::Monitor;
//! use randfeat_rs::Error;
//!
//! let monitor = Monitor::new();
//! monitor.stage("blocks", 10);
//! monitor.advance(3);
//! assert_eq!(monitor.snapshot(), ("blocks".to_string(), 3, 10));
//! assert!(monitor.check().is_ok());
//! monitor.cancel();
//! assert_eq!(monitor.check(), Err(Error::Interrupted));
//! ```
//!
//! A caller that wants neither progress nor cancellation passes
//! `&Monitor::default()`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// The progress and the cancellation flag of one long call (see the module
/// docs). Shared by reference between the routine, its worker threads and
/// the thread that watches it; every method takes `&self`.
///
/// One stage is current at a time: a routine that runs two parts side by
/// side reports one of them here and gives the other a [`Monitor::linked`]
/// monitor.
#[derive(Debug, Default)]
pub struct Monitor {
    cancelled: Arc<AtomicBool>,
    done: AtomicU64,
    total: AtomicU64,
    state: Mutex<State>,
}

/// The parts of a [`Monitor`] that are not plain counters.
#[derive(Debug, Default)]
struct State {
    stage: String,
    messages: Vec<String>,
}

impl Monitor {
    /// A monitor with no stage, no messages, not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new monitor with its own stage and messages that shares this one's
    /// cancellation: cancelling either cancels both. For a part of a routine
    /// that runs beside the part whose progress is reported.
    pub fn linked(&self) -> Self {
        Self {
            cancelled: Arc::clone(&self.cancelled),
            ..Self::default()
        }
    }

    /// `Err(Error::Interrupted)` once [`Self::cancel`] was called, else `Ok`.
    /// Cheap (one atomic load): long loops call it once per block of work.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Interrupted)
        } else {
            Ok(())
        }
    }

    /// Asks the routine to stop: its next [`Self::check`] fails.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether [`Self::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Starts a stage of `total` units (0: the total is not known in
    /// advance); its done counter restarts at 0. `name` says what the units
    /// are, as a plural noun (e.g. "centroid GPs"), so that
    /// "{done}/{total} {name}" reads as a sentence.
    pub fn stage(&self, name: &str, total: u64) {
        let mut state = self.lock();
        state.stage.clear();
        state.stage.push_str(name);
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    /// Adds `n` units to the current stage's done counter.
    pub fn advance(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Queues a message for the owner (e.g. a finished optimizer run's
    /// summary); messages queue until [`Self::take_messages`].
    pub fn message(&self, text: impl Into<String>) {
        self.lock().messages.push(text.into());
    }

    /// `(stage, done, total)` of the current stage (an empty name before the
    /// first stage).
    pub fn snapshot(&self) -> (String, u64, u64) {
        let state = self.lock();
        (
            state.stage.clone(),
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }

    /// The messages queued since the last call, oldest first.
    pub fn take_messages(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().messages)
    }

    /// The state, also after a panic on another thread poisoned the lock
    /// (it holds only plain values, never half-updated invariants).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_makes_check_fail_from_any_thread() {
        let m = Monitor::new();
        assert!(!m.is_cancelled());
        assert_eq!(m.check(), Ok(()));
        std::thread::scope(|s| {
            s.spawn(|| m.cancel());
        });
        assert!(m.is_cancelled());
        assert_eq!(m.check(), Err(Error::Interrupted));
    }

    #[test]
    fn stage_counters_and_messages() {
        let m = Monitor::default();
        assert_eq!(m.snapshot(), (String::new(), 0, 0));
        m.stage("blocks of pair statistics", 6);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| m.advance(2));
            }
        });
        assert_eq!(
            m.snapshot(),
            ("blocks of pair statistics".to_string(), 6, 6)
        );
        // A new stage restarts the done counter.
        m.stage("centroids", 0);
        m.advance(1);
        assert_eq!(m.snapshot(), ("centroids".to_string(), 1, 0));
        m.message("first");
        m.message(String::from("second"));
        assert_eq!(m.take_messages(), vec!["first", "second"]);
        assert!(m.take_messages().is_empty());
    }

    #[test]
    fn linked_monitors_share_only_the_cancellation() {
        let m = Monitor::new();
        let side = m.linked();
        side.stage("candidate degrees", 4);
        side.message("side");
        assert_eq!(m.snapshot(), (String::new(), 0, 0));
        assert!(m.take_messages().is_empty());
        side.cancel();
        assert_eq!(m.check(), Err(Error::Interrupted));
        let other = Monitor::new();
        let child = other.linked();
        other.cancel();
        assert_eq!(child.check(), Err(Error::Interrupted));
    }
}
