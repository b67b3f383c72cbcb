"""GPyTorch anchor models of ``make bench-anchors``, written on GPyTorch's documented API.

The anchors run in float64 on 2 CPU threads (``torch.set_num_threads(2)``,
the machine type of the issues' anchor figures). Each wrapper has the
scikit-learn-like surface the comparison scripts time for randfeat_rs too
(``fit``, then ``predict_noisy`` or ``predict_proba``), so both sides go
through the same timing and scoring code.

- :class:`GPyTorchSGPR`: ``InducingPointKernel(ScaleKernel(RBFKernel()))``
  (Titsias' collapsed bound, the same objective as randfeat_rs's
  ``SparseGPR(method="vfe")``), a constant mean, a Gaussian likelihood,
  Adam; the inducing inputs trained or frozen.
- :class:`GPyTorchRFFGPR`: ``ScaleKernel(RFFKernel(num_samples))`` with
  ``ExactMarginalLogLikelihood`` (``2 num_samples`` cosine and sine features).
- :class:`GPyTorchDirichletGPC`: an exact GP per class (one batch of
  independent RBF GPs) on the targets of ``DirichletClassificationLikelihood``
  (Milios et al. 2018), Adam, and ``predict_proba`` as the mean softmax of
  sampled latents.
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from typing import Any

import numpy as np
import torch

# benches/ is on sys.path: the scripts put it there before importing this module.
from _common import machine_line

# GPyTorch's import runs torch.jit.script, which torch 2.15 flags as deprecated.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*", category=FutureWarning)
import gpytorch  # noqa: E402

N_THREADS = 2


def setup_torch() -> None:
    """Fix torch's thread count and float64 default; print the machine, versions and load."""
    torch.set_num_threads(N_THREADS)
    torch.set_default_dtype(torch.float64)
    print(f"Machine: {machine_line()}")
    print(
        f"Anchors: torch {torch.__version__} (CPU, {torch.get_num_threads()} threads, float64), "
        f"gpytorch {gpytorch.__version__}"
    )
    print(f"Load average: {os.getloadavg()}\n")


def tensor(a: np.ndarray) -> torch.Tensor:
    """A float64 tensor holding a copy of ``a`` (Adam updates parameters in place)."""
    return torch.tensor(np.asarray(a, dtype=np.float64))


class _SGPRModel(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, inducing, ard):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        rbf = gpytorch.kernels.RBFKernel(ard_num_dims=x.shape[1] if ard else None)
        self.base_covar_module = gpytorch.kernels.ScaleKernel(rbf)
        self.covar_module = gpytorch.kernels.InducingPointKernel(
            self.base_covar_module, inducing_points=inducing, likelihood=likelihood
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class _RFFModel(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, num_samples):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RFFKernel(num_samples=num_samples)
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class _DirichletModel(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, num_classes):
        super().__init__(x, y, likelihood)
        batch = torch.Size((num_classes,))
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch)
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=batch), batch_shape=batch
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _adam(model: torch.nn.Module, lr: float) -> torch.optim.Adam:
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)


class _Regressor:
    """Adam on ``-ExactMarginalLogLikelihood`` (per row), then the noisy predictive."""

    model: Any
    likelihood: Any

    def _train(self, n_steps: int, lr: float) -> list[float]:
        """Run ``n_steps`` Adam steps; return each step's wall time in seconds."""
        self.model.train()
        self.likelihood.train()
        optimizer = _adam(self.model, lr)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(self.likelihood, self.model)
        x, y = self.model.train_inputs[0], self.model.train_targets
        times = []
        for _ in range(n_steps):
            t0 = time.perf_counter()
            optimizer.zero_grad()
            loss = -mll(self.model(x), y)
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - t0)
        with torch.no_grad():
            self.bound_per_row_ = float(mll(self.model(x), y))
        self.log_marginal_likelihood_ = self.bound_per_row_ * y.numel()
        return times

    def step_time(self, n_steps: int, lr: float = 0.1) -> tuple[float, list[float]]:
        """Median and list of the wall times of ``n_steps`` Adam steps."""
        times = self._train(n_steps, lr)
        return statistics.median(times), times

    def predict_noisy(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the noisy predictive at ``X``."""
        self.model.eval()
        self.likelihood.eval()
        with torch.no_grad():
            pred = self.likelihood(self.model(tensor(X)))
            return pred.mean.numpy(), pred.variance.sqrt().numpy()


class GPyTorchSGPR(_Regressor):
    """GPyTorch's SGPR (``InducingPointKernel``) fitted by ``n_steps`` Adam steps.

    Parameters
    ----------
    inducing : ndarray of shape (M, n_features)
        Initial inducing inputs.
    train_inducing : bool
        Whether Adam moves the inducing inputs (GPyTorch's default) or
        they stay fixed (``requires_grad=False``).
    ard : bool
        One length scale per input dimension (``ard_num_dims``).
    n_steps : int
        Adam steps of ``fit``.
    lr : float
        Adam's learning rate.
    """

    def __init__(
        self,
        inducing: np.ndarray,
        *,
        train_inducing: bool,
        ard: bool = False,
        n_steps: int = 100,
        lr: float = 0.1,
    ):
        self.inducing, self.train_inducing, self.ard = inducing, train_inducing, ard
        self.n_steps, self.lr = n_steps, lr

    def build(self, X: np.ndarray, y: np.ndarray) -> GPyTorchSGPR:
        """Set up the model on ``(X, y)`` without training."""
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
        self.model = _SGPRModel(
            tensor(X), tensor(y), self.likelihood, tensor(self.inducing), self.ard
        )
        self.model.covar_module.inducing_points.requires_grad_(self.train_inducing)
        return self

    def fit(self, X: np.ndarray, y: np.ndarray) -> GPyTorchSGPR:
        """``n_steps`` Adam steps on the negative bound per row."""
        self.build(X, y)._train(self.n_steps, self.lr)
        scaled = self.model.base_covar_module
        self.length_scale_ = scaled.base_kernel.lengthscale.detach().numpy().ravel()
        self.kernel_variance_ = scaled.outputscale.item()
        self.noise_variance_ = self.likelihood.noise.item()
        self.n_iter_ = self.n_steps
        return self


class GPyTorchRFFGPR(_Regressor):
    """GPyTorch's exact GP on ``ScaleKernel(RFFKernel(num_samples))``.

    Parameters
    ----------
    num_samples : int
        Random frequencies (``2 num_samples`` features).
    """

    def __init__(self, num_samples: int):
        self.num_samples = num_samples

    def build(self, X: np.ndarray, y: np.ndarray) -> GPyTorchRFFGPR:
        """Set up the model on ``(X, y)`` without training."""
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
        self.model = _RFFModel(tensor(X), tensor(y), self.likelihood, self.num_samples)
        return self


class GPyTorchDirichletGPC:
    """GPyTorch's Dirichlet-based GP classifier (exact GPs, one batch of classes).

    Parameters
    ----------
    n_steps : int
        Adam steps of ``fit`` on the summed negative marginal likelihoods.
    lr : float
        Adam's learning rate.
    n_samples : int
        Latent draws averaged by ``predict_proba``.
    seed : int
        Seeds torch's generator before the draws.
    """

    def __init__(self, n_steps: int = 50, lr: float = 0.1, n_samples: int = 256, seed: int = 0):
        self.n_steps, self.lr, self.n_samples, self.seed = n_steps, lr, n_samples, seed

    def fit(self, X: np.ndarray, y: np.ndarray) -> GPyTorchDirichletGPC:
        """Adam on the class GPs' summed negative marginal likelihood (per row)."""
        self.classes_, codes = np.unique(y, return_inverse=True)
        self.likelihood = gpytorch.likelihoods.DirichletClassificationLikelihood(
            torch.as_tensor(codes, dtype=torch.long),
            learn_additional_noise=True,
            dtype=torch.float64,
        )
        targets = self.likelihood.transformed_targets
        self.model = _DirichletModel(
            tensor(X), targets, self.likelihood, self.likelihood.num_classes
        )
        self.model.train()
        self.likelihood.train()
        optimizer = _adam(self.model, self.lr)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(self.likelihood, self.model)
        x = self.model.train_inputs[0]
        for _ in range(self.n_steps):
            optimizer.zero_grad()
            loss = -mll(self.model(x), targets).sum()
            loss.backward()
            optimizer.step()
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Mean over ``n_samples`` latent draws of their softmax over the classes."""
        self.model.eval()
        self.likelihood.eval()
        torch.manual_seed(self.seed)
        with torch.no_grad():
            latent = self.model(tensor(X))
            draws = latent.sample(torch.Size((self.n_samples,)))
            proba = torch.softmax(draws, dim=-2).mean(0)
        return proba.T.numpy()
