//! How the Python edge cuts row-wise work (a feature map's transform, the
//! bin keys of the random binning) into consecutive row ranges, the pieces
//! that a Ctrl-C can stop between and that progress is reported after.
//!
//! Two costs size a piece: its floating-point work and the bytes of fresh
//! output it writes. The second is not a small term: the first write to a
//! freshly allocated page faults it in, which on a virtual machine whose
//! memory the host backs lazily runs at about 1 GB/s (a first 3 GB output
//! can take seconds where a reused one takes a tenth of a second), so a
//! piece sized by its flops alone can hold a Ctrl-C for seconds. Every
//! piece writes at most [`PIECE_BYTES`].

use std::ops::Range;

/// Work of at most this many floating-point operations per pool thread
/// (roughly 0.05 to 0.5 s at the 10 to 80 Gflop/s a thread that the maps
/// reach) runs in one piece when no progress is reported and its output
/// fits [`PIECE_BYTES`]: a Ctrl-C waits for the piece, and every extra piece
/// costs a parallel dispatch and its uneven tail.
const ONE_PIECE_FLOPS: f64 = (1u64 << 32) as f64;

/// Work of at most this many floating-point operations (well under a
/// millisecond on one core) runs on the calling thread, sequentially, when
/// no progress is reported: handing it to the pool and back would cost more
/// than the work, and nothing that short needs a Ctrl-C check.
const INLINE_FLOPS: f64 = (1u64 << 18) as f64;

/// Floating-point operations per pool thread of the first piece when the
/// work is split (always when progress is reported, so that the display
/// moves): per thread, so that a wide pool starts with a piece that keeps
/// every thread busy, not one thread's share spread over all of them.
const FIRST_PIECE_FLOPS: f64 = (1u64 << 28) as f64;

/// The least rows of a piece (when its work and bytes allow), per pool
/// thread: enough that the maps' own parallel row chunks keep every thread
/// busy.
const PIECE_ROWS_PER_THREAD: usize = 2048;

/// The duration the pieces after the first are sized for, from the
/// measured time of the one before.
const PIECE_SECONDS: f64 = 0.1;

/// Pieces of at least this many rows per pool thread are cut to whole
/// multiples of it: a multiple of every map's rows per parallel work item
/// (16 to 512), so that each thread of a piece gets the same number of work
/// items instead of one thread finishing a piece's odd item alone.
const PIECE_ALIGN_ROWS: usize = 512;

/// The most bytes of output one piece writes: about 0.13 s of first writes
/// to fresh pages at the 1 GB/s of a lazily backed virtual machine, and
/// still tens of milliseconds of work where the pages are already there,
/// which a piece's dispatch (tens of microseconds) does not notice.
pub(crate) const PIECE_BYTES: f64 = (1u64 << 27) as f64;

/// How a [`RowWork`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// One range on the calling thread, sequentially.
    Inline,
    /// One range in the pool, nothing checked or reported in between.
    OnePiece,
    /// Consecutive pieces ([`Pieces`]), a Ctrl-C check before each.
    Split,
}

/// Row-wise work to cut into pieces: `rows` rows of about `row_flops`
/// floating-point operations and `row_bytes` bytes of output each, run by a
/// pool of `threads` threads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowWork {
    /// The rows to cover.
    pub rows: usize,
    /// A rough count of the floating-point operations of one row (at least
    /// one is assumed).
    pub row_flops: f64,
    /// The bytes of output one row writes.
    pub row_bytes: f64,
    /// The threads of the pool that runs the pieces (at least one).
    pub threads: usize,
}

impl RowWork {
    fn flops_per_row(&self) -> f64 {
        self.row_flops.max(1.0)
    }

    fn pool(&self) -> usize {
        self.threads.max(1)
    }

    /// How the work runs: inline when it is tiny, in one piece when it is
    /// at most [`ONE_PIECE_FLOPS`] per thread and [`PIECE_BYTES`] of output,
    /// split otherwise; always split when progress is reported.
    pub fn plan(&self, progress: bool) -> Plan {
        let flops = self.rows as f64 * self.flops_per_row();
        if progress {
            Plan::Split
        } else if flops <= INLINE_FLOPS {
            Plan::Inline
        } else if flops <= ONE_PIECE_FLOPS * self.pool() as f64
            && self.rows as f64 * self.row_bytes <= PIECE_BYTES
        {
            Plan::OnePiece
        } else {
            Plan::Split
        }
    }

    /// The pieces of [`Plan::Split`].
    pub fn pieces(self) -> Pieces {
        let threads = self.pool();
        let len = (FIRST_PIECE_FLOPS * threads as f64 / self.flops_per_row()) as usize;
        Pieces {
            least: (PIECE_ROWS_PER_THREAD * threads).min(len.max(1)),
            most: if self.row_bytes > 0.0 {
                ((PIECE_BYTES / self.row_bytes) as usize).max(1)
            } else {
                usize::MAX
            },
            work: self,
            len,
            start: 0,
            first: true,
        }
    }
}

/// The consecutive row ranges of a split [`RowWork`]: the first of about
/// [`FIRST_PIECE_FLOPS`] per thread, each next one sized from the measured
/// time of the one before to [`PIECE_SECONDS`] (at most 8 times longer),
/// all of at least [`PIECE_ROWS_PER_THREAD`] rows a thread (where the first
/// piece's work allows), rounded to whole multiples of [`PIECE_ALIGN_ROWS`]
/// a thread ([`align_piece`]), and of at most [`PIECE_BYTES`] of output.
/// Work of no rows is one empty range, so that its checks still run.
#[derive(Debug)]
pub(crate) struct Pieces {
    work: RowWork,
    least: usize,
    most: usize,
    len: usize,
    start: usize,
    /// No range has been given yet.
    first: bool,
}

impl Pieces {
    /// The next range, or `None` when every row is covered.
    pub fn next_range(&mut self) -> Option<Range<usize>> {
        let rows = self.work.rows;
        if self.start >= rows && !self.first {
            return None;
        }
        self.first = false;
        let aligned = align_piece(
            self.len.max(self.least),
            PIECE_ALIGN_ROWS * self.work.pool(),
        );
        let end = self.start + aligned.min(self.most).min(rows - self.start);
        Some(self.start..end)
    }

    /// Records that `range` (the last of [`Pieces::next_range`]) took
    /// `seconds`, which sizes the next piece.
    pub fn done(&mut self, range: Range<usize>, seconds: f64) {
        let scale = PIECE_SECONDS / seconds.max(1e-6);
        self.len = (range.len() as f64 * scale.min(8.0)) as usize;
        self.start = range.end;
    }
}

/// `len` rounded to the nearest whole multiple of `unit` when it is at least
/// `unit` (pieces of fewer rows, whose rows are expensive, keep their
/// length).
fn align_piece(len: usize, unit: usize) -> usize {
    if len < unit {
        len
    } else {
        (len + unit / 2) / unit * unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(rows: usize, row_flops: f64, row_bytes: f64) -> RowWork {
        RowWork {
            rows,
            row_flops,
            row_bytes,
            threads: 2,
        }
    }

    /// Every range of a split, each taking `seconds`.
    fn ranges(w: RowWork, seconds: f64) -> Vec<Range<usize>> {
        let mut pieces = w.pieces();
        let mut out = Vec::new();
        while let Some(r) = pieces.next_range() {
            pieces.done(r.clone(), seconds);
            out.push(r);
            assert!(out.len() < 1_000_000, "the pieces never end");
        }
        out
    }

    fn covers(rs: &[Range<usize>], rows: usize) {
        let mut at = 0;
        for r in rs {
            assert_eq!(r.start, at);
            assert!(r.end > r.start || rows == 0);
            at = r.end;
        }
        assert_eq!(at, rows);
    }

    #[test]
    fn tiny_work_runs_inline_and_large_work_is_split() {
        assert_eq!(work(10, 100.0, 8.0).plan(false), Plan::Inline);
        assert_eq!(work(10, 100.0, 8.0).plan(true), Plan::Split);
        // 1e5 rows of 1e4 flops: 1e9 flops, under one piece's 2 x 2^32.
        assert_eq!(work(100_000, 1e4, 8.0).plan(false), Plan::OnePiece);
        // 1e7 rows of 1e4 flops: 1e11 flops.
        assert_eq!(work(10_000_000, 1e4, 8.0).plan(false), Plan::Split);
    }

    #[test]
    fn an_output_over_the_piece_bytes_is_never_one_piece() {
        // 47,000 rows of 8,192 float64 columns (a 3 GB output) with few
        // flops a row: one piece by its flops, not by its bytes.
        let cheap_wide = work(47_000, 8192.0 * 22.0, 8192.0 * 8.0);
        assert!(47_000.0 * cheap_wide.row_flops <= ONE_PIECE_FLOPS * 2.0);
        assert_eq!(cheap_wide.plan(false), Plan::Split);
        let rs = ranges(cheap_wide, 0.01);
        covers(&rs, 47_000);
        for r in &rs {
            assert!(
                r.len() as f64 * cheap_wide.row_bytes <= PIECE_BYTES,
                "{r:?}"
            );
        }
        // The same rows without an output (the bin keys) stay one piece.
        assert_eq!(work(47_000, 8192.0 * 22.0, 0.0).plan(false), Plan::OnePiece);
    }

    #[test]
    fn pieces_cover_the_rows_in_order_and_follow_the_measured_time() {
        let w = work(1_000_000, 1e5, 64.0);
        // Fast pieces grow (at most 8x a step), slow ones shrink.
        let fast = ranges(w, 0.001);
        covers(&fast, 1_000_000);
        assert!(fast[1].len() > fast[0].len());
        let slow = ranges(w, 10.0);
        covers(&slow, 1_000_000);
        // Never under the least rows per thread (2 x 2,048) once split.
        assert!(slow.iter().rev().skip(1).all(|r| r.len() >= 4096));
        // Whole multiples of 512 rows a thread.
        assert!(fast.iter().rev().skip(1).all(|r| r.len() % 1024 == 0));
        // A row wider than the piece bytes still moves on, one row a piece.
        let huge = ranges(work(3, 1e3, 2.0 * PIECE_BYTES), 0.5);
        assert_eq!(huge, vec![0..1, 1..2, 2..3]);
    }

    #[test]
    fn no_rows_is_one_empty_range() {
        assert_eq!(ranges(work(0, 1e3, 8.0), 0.1), vec![0..0]);
        assert_eq!(work(0, 1e3, 8.0).plan(false), Plan::Inline);
    }
}
