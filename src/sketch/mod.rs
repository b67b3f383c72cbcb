//! Polynomial sketches (ALGORITHMS.md section 2): random feature maps for
//! the dot-product kernel `(xᵀy)^n`, and their closed-form variances.

pub mod variance;

use crate::error::{Error, Result};

/// The four sketch constructions of ALGORITHMS.md 2.2–2.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SketchKind {
    /// i.i.d. Gaussian weights (2.2).
    Gaussian,
    /// i.i.d. Rademacher (±1) weights (2.2).
    Rademacher,
    /// Structured: random signs, FWHT and random permutations (2.3).
    TensorSrht,
    /// CountSketch + FFT (2.4); real only.
    TensorSketch,
}

impl SketchKind {
    /// Parses the Python spelling: "gaussian", "rademacher", "tensor_srht",
    /// "tensor_sketch".
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "gaussian" => Ok(Self::Gaussian),
            "rademacher" => Ok(Self::Rademacher),
            "tensor_srht" => Ok(Self::TensorSrht),
            "tensor_sketch" => Ok(Self::TensorSketch),
            other => Err(Error::invalid(
                "sketch",
                format!(
                    "unknown sketch {other:?}; expected one of \"gaussian\", \"rademacher\", \
                     \"tensor_srht\", \"tensor_sketch\""
                ),
            )),
        }
    }

    /// The Python spelling of the kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gaussian => "gaussian",
            Self::Rademacher => "rademacher",
            Self::TensorSrht => "tensor_srht",
            Self::TensorSketch => "tensor_sketch",
        }
    }
}
