//! Size checks for the allocations whose size comes from a user's argument
//! (`n_components`, `n_grids`, `n_inducing`, `max_degree`, the rows of an
//! output): every such allocation is measured in bytes with overflow checks
//! and compared with the memory available *before* anything is allocated,
//! and the large buffers are allocated fallibly ([`try_zeroed_vec`]), so that a size
//! that cannot work is an [`Error::InvalidParameter`] naming the argument to
//! change instead of an abort of the process ("memory allocation failed")
//! or a run of minutes.

use crate::error::{Error, Result};

/// The bytes of `dims[0] × dims[1] × …` elements of `elem_bytes` bytes each,
/// or `None` when the product overflows `u64`.
pub fn bytes_of(dims: &[usize], elem_bytes: usize) -> Option<u64> {
    dims.iter()
        .try_fold(elem_bytes as u64, |acc, &n| acc.checked_mul(n as u64))
}

/// A byte count for a message: the exact bytes and the GiB.
fn show_bytes(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{b} bytes ({:.1} GiB)", b as f64 / (1u64 << 30) as f64),
        None => "more than 2^64 bytes".to_string(),
    }
}

/// The [`Error::InvalidParameter`] of an allocation that does not fit:
/// names `param` (the argument to lower), says what was to be allocated
/// (`what`, e.g. "the frequencies (16 x 10^12 float64)"), its size in bytes
/// and the budget.
pub fn too_large(param: &'static str, what: &str, bytes: Option<u64>, limit: u64) -> Error {
    Error::invalid(
        param,
        format!(
            "{what} would take {} but only {} of memory is available; lower {param}",
            show_bytes(bytes),
            show_bytes(Some(limit)),
        ),
    )
}

/// Checks that `dims` elements of `elem_bytes` bytes fit in `limit` bytes;
/// returns their size in bytes, else [`too_large`] naming `param`.
pub fn check_within(
    param: &'static str,
    what: &str,
    dims: &[usize],
    elem_bytes: usize,
    limit: u64,
) -> Result<u64> {
    match bytes_of(dims, elem_bytes) {
        Some(b) if b <= limit => Ok(b),
        b => Err(too_large(param, what, b, limit)),
    }
}

/// Allocations up to this size pass [`check_alloc`] without reading the
/// memory available (a file read, which would cost more than a small
/// transform): a machine this library runs on has that much to spare, and
/// the fallible allocation of [`try_zeroed_vec`] still turns an allocator's
/// refusal into an error.
pub const UNCHECKED_BYTES: u64 = 64 << 20;

/// [`check_within`] against the memory available now
/// ([`crate::system::available_memory_bytes`]), which is read only for
/// allocations over [`UNCHECKED_BYTES`].
pub fn check_alloc(
    param: &'static str,
    what: &str,
    dims: &[usize],
    elem_bytes: usize,
) -> Result<u64> {
    match bytes_of(dims, elem_bytes) {
        Some(b) if b <= UNCHECKED_BYTES => Ok(b),
        _ => check_within(
            param,
            what,
            dims,
            elem_bytes,
            crate::system::available_memory_bytes(),
        ),
    }
}

/// `n` zeros, allocated fallibly after [`check_alloc`]: a size that does not
/// fit, or an allocation the system refuses, is [`too_large`] naming `param`
/// instead of an abort. The buffer comes zeroed from the allocator
/// (`alloc_zeroed`), so large buffers are fresh pages the OS zeroes on first
/// touch, written once by the threads that fill them, instead of by a
/// zero-filling pass on the calling thread.
pub fn try_zeroed_vec<T: bytemuck::Zeroable>(
    param: &'static str,
    what: &str,
    n: usize,
) -> Result<Vec<T>> {
    let elem = std::mem::size_of::<T>();
    check_alloc(param, what, &[n], elem)?;
    bytemuck::allocation::try_zeroed_vec(n).map_err(|()| {
        too_large(
            param,
            what,
            bytes_of(&[n], elem),
            crate::system::available_memory_bytes(),
        )
    })
}

/// The number of elements `Π dims`, or [`too_large`] naming `param` when
/// it overflows `usize` (no allocation could hold it).
pub fn checked_count(param: &'static str, what: &str, dims: &[usize]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| too_large(param, what, None, crate::system::available_memory_bytes()))
}

/// A `rows × cols` array of zeros, allocated fallibly ([`try_zeroed_vec`]):
/// a size that overflows, does not fit, or that the system refuses is
/// [`too_large`] naming `param` instead of an abort.
pub fn try_zeros2<T: bytemuck::Zeroable>(
    param: &'static str,
    what: &str,
    rows: usize,
    cols: usize,
) -> Result<ndarray::Array2<T>> {
    let n = checked_count(param, what, &[rows, cols])?;
    let v = try_zeroed_vec(param, what, n)?;
    ndarray::Array2::from_shape_vec((rows, cols), v)
        .map_err(|e| Error::Internal(format!("{what}: {e}")))
}

/// Grows the scratch buffer `buf` to at least `dims` elements (`Π dims`;
/// it never shrinks), fallibly: a count that overflows, a size that does
/// not fit, or a growth the system refuses is [`too_large`] naming `param`
/// instead of an abort. Returns the count.
pub fn try_grow<T: bytemuck::Zeroable + Copy>(
    buf: &mut Vec<T>,
    param: &'static str,
    what: &str,
    dims: &[usize],
) -> Result<usize> {
    let n = checked_count(param, what, dims)?;
    if buf.len() < n {
        let elem = std::mem::size_of::<T>();
        check_alloc(param, what, &[n], elem)?;
        buf.try_reserve_exact(n - buf.len()).map_err(|_| {
            too_large(
                param,
                what,
                bytes_of(&[n], elem),
                crate::system::available_memory_bytes(),
            )
        })?;
        buf.resize(n, T::zeroed());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sizes_pass_and_huge_ones_are_refused() {
        assert_eq!(check_alloc("n", "x", &[1024, 1024], 8), Ok(8 << 20));
        let e = check_alloc("n", "x", &[1 << 40, 1 << 20], 8).unwrap_err();
        assert!(e.to_string().contains("lower n"), "{e}");
    }

    #[test]
    fn scratch_grows_and_refuses_what_cannot_fit() {
        let mut buf = vec![1.0f64; 4];
        assert_eq!(try_grow(&mut buf, "chunk_size", "x", &[2, 3]), Ok(6));
        assert_eq!(buf, [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
        // Never shrinks.
        assert_eq!(try_grow(&mut buf, "chunk_size", "x", &[2]), Ok(2));
        assert_eq!(buf.len(), 6);
        for dims in [&[1usize << 40, 1 << 20][..], &[usize::MAX, 3]] {
            let e = try_grow(&mut buf, "chunk_size", "x", dims).unwrap_err();
            assert!(e.to_string().contains("lower chunk_size"), "{e}");
            assert_eq!(buf.len(), 6);
        }
    }

    #[test]
    fn bytes_overflow_is_none() {
        assert_eq!(bytes_of(&[3, 4], 8), Some(96));
        assert_eq!(bytes_of(&[], 8), Some(8));
        assert_eq!(bytes_of(&[usize::MAX, 2], 8), None);
    }

    #[test]
    fn refusal_names_the_parameter_and_the_bytes() {
        assert_eq!(check_within("n", "x", &[4, 4], 8, 128), Ok(128));
        let e = check_within(
            "n_components",
            "the frequencies",
            &[16, 1 << 40],
            8,
            1 << 30,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`n_components`"), "{e}");
        assert!(e.contains("140737488355328 bytes"), "{e}");
        assert!(e.contains("lower n_components"), "{e}");
        let e = check_within("n_grids", "keys", &[usize::MAX, 3], 8, 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 2^64 bytes"), "{e}");
    }

    #[test]
    fn size_parameters_are_refused_before_allocating() {
        // Each constructor refuses 10^12 features (petabytes) with the
        // parameter's name, instead of aborting on the allocation or
        // running for minutes.
        use crate::binning::{BinningGrids, Laplacian};
        use crate::fourier::{FourierConfig, FourierFeatures};
        use crate::gp::localized::{LocalizedConfig, LocalizedMaclaurinGp};
        use crate::maclaurin::{MaclaurinConfig, MaclaurinKernel, MaclaurinMap};
        use crate::progress::Monitor;
        use crate::sketch::{PolySketch, SketchKind};
        use crate::threads::Parallelism;
        const HUGE: usize = 1_000_000_000_000;
        let names = |e: Error, name: &str| {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("`{name}`")) && msg.contains("bytes"),
                "{msg}"
            );
        };
        let e = FourierFeatures::fit(&FourierConfig::new(HUGE), 16, 0).unwrap_err();
        names(e, "n_components");
        for kind in [
            SketchKind::Gaussian,
            SketchKind::Rademacher,
            SketchKind::TensorSrht,
        ] {
            let e = PolySketch::draw(kind, false, 2, 16, HUGE, &mut crate::rng::seeded(0));
            names(e.unwrap_err(), "n_components");
        }
        let x = ndarray::Array2::from_shape_fn((20, 3), |(i, j)| ((i * 3 + j) as f64).sin());
        let cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, HUGE);
        let e = MaclaurinMap::fit(x.view(), &cfg, 0, Parallelism::Sequential, &Monitor::new());
        names(e.unwrap_err(), "n_components");
        let mut cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 16);
        cfg.max_degree = 1_000_000;
        let e = MaclaurinMap::fit(x.view(), &cfg, 0, Parallelism::Sequential, &Monitor::new());
        assert!(e.unwrap_err().to_string().contains("`max_degree`"));
        let y = ndarray::Array1::zeros(20);
        let e = LocalizedMaclaurinGp::fit(
            x.view(),
            y.view(),
            &LocalizedConfig::new(HUGE),
            0,
            Parallelism::Sequential,
            &Monitor::new(),
        );
        names(e.err().unwrap(), "n_components");
        let grids = BinningGrids::draw(&Laplacian::new(1.0).unwrap(), HUGE, 16, 0);
        names(grids.err().unwrap(), "n_grids");
        names(
            crate::stats::FeatureStats::check_size("n_components", 10_000_000, 1).unwrap_err(),
            "n_components",
        );
    }

    #[test]
    fn try_zeros2_refuses_instead_of_aborting() {
        let a = try_zeros2::<f64>("n", "x", 2, 3).unwrap();
        assert_eq!(a, ndarray::Array2::<f64>::zeros((2, 3)));
        let e = try_zeros2::<f64>("n_components", "x", usize::MAX, 2).unwrap_err();
        assert!(e.to_string().contains("more than 2^64 bytes"), "{e}");
        let e = try_zeros2::<f64>("n_grids", "x", 1 << 40, 1 << 10).unwrap_err();
        assert!(e.to_string().contains("lower n_grids"), "{e}");
    }

    #[test]
    fn checked_count_refuses_an_overflowing_product() {
        assert_eq!(checked_count("n", "x", &[3, 4, 5]), Ok(60));
        assert_eq!(checked_count("n", "x", &[]), Ok(1));
        let e = checked_count("n_components", "x", &[usize::MAX, 1, 2]).unwrap_err();
        assert!(e.to_string().contains("lower n_components"), "{e}");
    }

    #[test]
    fn try_zeroed_vec_refuses_instead_of_aborting() {
        assert_eq!(try_zeroed_vec::<f64>("n", "x", 3).unwrap(), vec![0.0; 3]);
        assert!(try_zeroed_vec::<f64>("n_components", "x", usize::MAX / 8).is_err());
        assert!(try_zeroed_vec::<u8>("n_components", "x", 1 << 60).is_err());
    }
}
