//! The one error type of the crate. Every fallible public function returns
//! [`Result`]; the Python bindings map each variant to one exception class
//! (see `python/randfeat_rs/exceptions.py`).

/// Errors raised by randfeat_rs. Each variant carries the context a user needs
/// to fix the call (the argument name, the expected and the actual value).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A length that must be a power of two is not (e.g. the FWHT input).
    #[error("length {len} is not a power of two (the next power of two is {next}); zero-pad the input to {next}")]
    NotPowerOfTwo {
        /// The offending length.
        len: usize,
        /// The smallest power of two `>= len` (1 for `len = 0`).
        next: usize,
    },
    /// An array has the wrong size along some axis.
    #[error("{name}: expected {expected}, got {got}")]
    ShapeMismatch {
        /// What was measured, e.g. "number of features of X".
        name: &'static str,
        /// The size the call needs.
        expected: usize,
        /// The size that was passed.
        got: usize,
    },
    /// An argument is outside its valid range or is not a known option.
    #[error("invalid value for `{name}`: {reason}")]
    InvalidParameter {
        /// The argument's name as the user spells it.
        name: &'static str,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// The input contains NaN or infinite values where they are not allowed.
    #[error("`{name}` contains NaN or infinite values")]
    NonFinite {
        /// The argument's name.
        name: &'static str,
    },
    /// A Cholesky factorization failed even after the jitter ladder.
    #[error("matrix is not positive definite (the factorization failed at pivot {index})")]
    NotPositiveDefinite {
        /// The pivot at which the factorization broke down.
        index: usize,
    },
    /// The kernel matrix of a sparse GP's inducing inputs `K_uu` is not
    /// positive definite even with the largest jitter of the ladder, or is
    /// numerically singular with its jitter (VFE's Nyström trace exceeds
    /// the kernel's), or too ill-conditioned for the ratio of the kernel
    /// variance to the noise variance.
    #[error(
        "the kernel matrix of the M = {m} inducing inputs is not positive definite (or \
         numerically singular) with jitter {jitter:e} added to its diagonal; inducing \
         inputs that (nearly) coincide, or a length scale long against their spacing, make it \
         singular, and a noise_variance far below the kernel_variance needs it to more digits \
         than float64 holds: re-initialize with fewer inducing inputs (n_inducing), with \
         inducing=\"greedy_variance\" (it skips inputs the others already explain), with a \
         shorter initial length_scale, or with a larger noise_variance"
    )]
    InducingNotPositiveDefinite {
        /// The number of inducing inputs `M`.
        m: usize,
        /// The jitter added to the diagonal at the last attempt.
        jitter: f64,
    },
    /// A sparse GP's statistics `K_uf K_fu`, `K_uf y` computed on the GPU in
    /// float32 do not make a positive definite `B = I + L⁻¹ S L⁻ᵀ / σ_n²`
    /// (or their Nyström trace exceeds the kernel's): `K_uu` is too
    /// ill-conditioned for float32 statistics (docs/math/sparse_gp.rst,
    /// section Devices).
    #[error(
        "the GPU's float32 statistics K_uf K_fu of the M = {m} inducing inputs are not \
         accurate enough for them: the kernel matrix K_uu is too ill-conditioned for float32 \
         rounding at this noise variance (I + L^-1 K_uf K_fu L^-T / noise_variance came out \
         indefinite, or the Nystrom trace above the kernel's); compute the statistics in \
         float64 with device=\"cpu\" (device=\"auto\" falls back to it), or use fewer \
         inducing inputs (n_inducing), a shorter length_scale or a larger noise_variance"
    )]
    GpuStatisticsNotPositiveDefinite {
        /// The number of inducing inputs `M`.
        m: usize,
    },
    /// The GPU was requested but no adapter is usable, or a GPU call failed
    /// (device creation, buffer allocation, shader validation, device lost).
    #[error("GPU error: {0}")]
    Gpu(String),
    /// The worker thread pool could not be created.
    #[error("could not build the thread pool: {0}")]
    ThreadPool(String),
    /// The call was cancelled through its [`crate::progress::Monitor`] (the
    /// Python bindings cancel on Ctrl-C and raise `KeyboardInterrupt`).
    #[error("interrupted")]
    Interrupted,
    /// A Rust panic caught at the FFI edge: a bug in randfeat_rs, never the
    /// user's fault. Carries the panic message.
    #[error("internal error (a Rust panic was caught; please report it): {0}")]
    Internal(String),
}

/// `Result` with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name,
            reason: reason.into(),
        }
    }

    /// `Ok` when `got == expected`; otherwise the [`Error::ShapeMismatch`]
    /// every fitted map reports for an `X` of the wrong width.
    pub fn check_n_features(expected: usize, got: usize) -> Result<()> {
        if got == expected {
            Ok(())
        } else {
            Err(Error::ShapeMismatch {
                name: "number of features of X",
                expected,
                got,
            })
        }
    }

    /// `Ok` when every size in `sizes` equals `expected`; otherwise the
    /// [`Error::ShapeMismatch`] naming the first that does not (each name
    /// says what the size is of, and why it must be `expected`).
    pub(crate) fn check_sizes<const K: usize>(
        expected: usize,
        sizes: [(&'static str, usize); K],
    ) -> Result<()> {
        Self::check_all_sizes(expected, sizes)
    }

    /// [`Error::check_sizes`] for a list whose length is known at run time.
    pub(crate) fn check_all_sizes(
        expected: usize,
        sizes: impl IntoIterator<Item = (&'static str, usize)>,
    ) -> Result<()> {
        match sizes.into_iter().find(|&(_, got)| got != expected) {
            None => Ok(()),
            Some((name, got)) => Err(Error::ShapeMismatch {
                name,
                expected,
                got,
            }),
        }
    }

    /// `Ok` when an output buffer has the shape `(rows, cols)` a map writes;
    /// otherwise the [`Error::ShapeMismatch`] naming the wrong dimension
    /// (rows first).
    pub fn check_out_shape(expected: (usize, usize), got: (usize, usize)) -> Result<()> {
        let (name, expected, got) = if got.0 != expected.0 {
            ("number of rows of out", expected.0, got.0)
        } else if got.1 != expected.1 {
            ("number of columns of out", expected.1, got.1)
        } else {
            return Ok(());
        };
        Err(Error::ShapeMismatch {
            name,
            expected,
            got,
        })
    }
}

/// Checks that every value is finite; otherwise [`Error::NonFinite`] naming
/// `name`.
pub(crate) fn check_finite<'a>(
    name: &'static str,
    v: impl IntoIterator<Item = &'a f64>,
) -> Result<()> {
    if v.into_iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err(Error::NonFinite { name })
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn out_shape_names_the_wrong_dimension() {
        assert!(Error::check_out_shape((3, 4), (3, 4)).is_ok());
        let rows = Error::check_out_shape((3, 4), (2, 4)).unwrap_err();
        assert!(matches!(
            rows,
            Error::ShapeMismatch {
                name: "number of rows of out",
                expected: 3,
                got: 2
            }
        ));
        let cols = Error::check_out_shape((3, 4), (3, 5)).unwrap_err();
        assert!(matches!(
            cols,
            Error::ShapeMismatch {
                name: "number of columns of out",
                expected: 4,
                got: 5
            }
        ));
    }
}
