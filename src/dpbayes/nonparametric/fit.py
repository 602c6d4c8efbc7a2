"""Posterior of the distribution P of the sensitive values: draws of P and their functionals.

Each saved Gibbs iteration yields a draw of P (discrete: atoms and weights, see
:meth:`DPMixture.draw_p`). Functionals (mean, variance, quantiles, CDF, smoothed
density) are computed per draw; point estimates are posterior means, bands are
pointwise equal-tailed credible intervals. The fit is post-processing of the
privatised data, so it carries the data's :class:`~dpbayes.privacy.Guarantee`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpbayes import display
from dpbayes.nonparametric import kernels
from dpbayes.nonparametric.diagnostics import check_convergence, diagnose
from dpbayes.privacy import Guarantee
from dpbayes.privacy.validation import check_array, check_positive, check_probability

__all__ = ["DPMixtureFit", "band_at", "band_depths", "simultaneous_band"]

_SUMMARY_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)

NO_GUARANTEE = "none (input: a plain array; its privacy is not verified)"
"""What a fit on a plain array (not a PrivatizedColumn) says about its guarantee."""


def _pad(rows: list[np.ndarray], width: int, fill_last: bool) -> np.ndarray:
    out = np.empty((len(rows), width))
    for i, row in enumerate(rows):
        out[i, : row.size] = row
        out[i, row.size :] = row[-1] if fill_last else 0.0
    return out


def simultaneous_band(draws: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Simultaneous credible band from (draws, ...) samples of a function on a grid.

    Candidate bands are the symmetric order statistics (x_(k), x_(D-1-k)) at every point,
    k = 0, 1, ...; a draw lies inside band k at every point iff k <= k_d = min over points
    of min(#{values <= its value} - 1, D - 1 - #{values < its value}). The band returned
    has the largest k such that at least a fraction ``level`` of the draws have k_d >= k:
    it contains whole draws with posterior probability >= ``level`` (up to Monte Carlo
    error), the rank envelope of Besag et al. (1995).
    """
    level = check_probability(level, "level", open_interval=True)
    x = np.asarray(draws, dtype=float)
    srt, depth = band_depths(x.reshape(x.shape[0], -1))
    lo, hi = band_at(srt, depth, level)
    return lo.reshape(x.shape[1:]), hi.reshape(x.shape[1:])


def band_depths(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted (draws, points) array and each draw's depth k_d (see
    :func:`simultaneous_band`): computed once for bands at several levels."""
    n_draws = flat.shape[0]
    srt = np.sort(flat, axis=0)
    depth = np.full(n_draws, n_draws)
    for j in range(flat.shape[1]):
        le = np.searchsorted(srt[:, j], flat[:, j], side="right")
        lt = np.searchsorted(srt[:, j], flat[:, j], side="left")
        depth = np.minimum(depth, np.minimum(le - 1, n_draws - 1 - lt))
    return srt, depth


def band_at(srt: np.ndarray, depth: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The simultaneous band at ``level`` from :func:`band_depths`' output."""
    n_draws = srt.shape[0]
    need = int(np.ceil(level * n_draws))
    k = int(np.sort(depth)[::-1][need - 1])  # the need-th largest depth
    k = min(max(k, 0), (n_draws - 1) // 2)
    return srt[k], srt[n_draws - 1 - k]


@dataclass(frozen=True)
class DPMixtureFit:
    """Posterior draws of P from :meth:`DPMixture.fit`.

    Attributes
    ----------
    atoms, cumw:
        (chains, draws, A): increasing atoms of each draw of P and the cumulative
        weights (padded with the last atom and weight 1).
    n_clusters, alpha:
        (chains, draws): occupied clusters and the concentration at each draw.
    base:
        (2, chains, draws): the base measure's (mu, sigma) at each draw.
    model:
        The :class:`DPMixture` that was fitted; ``n`` the number of observations.
    guarantee:
        The privacy guarantee of the data the posterior was computed from: that of the
        :class:`PrivatizedColumn` passed to :meth:`DPMixture.fit`, or None when the input
        was a plain array (raw data or a simulation: its privacy is not verified).
    seconds, sweeps:
        Wall time of the sampler and the number of Gibbs sweeps it ran.
    diagnostics:
        R-hat and ESS of the functionals (a DataFrame), or None if not computed.
    """

    atoms: np.ndarray
    cumw: np.ndarray
    n_clusters: np.ndarray
    alpha: np.ndarray
    base: np.ndarray
    model: Any
    n: int
    guarantee: Guarantee | None
    seconds: float
    sweeps: int
    diagnostics: Any = None

    @classmethod
    def from_draws(
        cls,
        atoms: list[list[np.ndarray]],
        weights: list[list[np.ndarray]],
        *,
        n_clusters: np.ndarray,
        alpha: np.ndarray,
        base: np.ndarray,
        model: Any,
        n: int,
        guarantee: Guarantee | None,
        seconds: float,
        sweeps: int,
        diagnostics: bool = True,
    ) -> DPMixtureFit:
        chains, draws = len(atoms), len(atoms[0])
        width = max(a.size for chain in atoms for a in chain)
        flat_a, flat_c = [], []
        for chain_a, chain_w in zip(atoms, weights, strict=True):
            for a, w in zip(chain_a, chain_w, strict=True):
                o = np.argsort(a, kind="stable")
                c = np.cumsum(w[o])
                flat_a.append(a[o])
                flat_c.append(c / c[-1])
        fit = cls(
            _pad(flat_a, width, True).reshape(chains, draws, width),
            _pad(flat_c, width, True).reshape(chains, draws, width),
            n_clusters,
            alpha,
            base,
            model,
            n,
            guarantee,
            seconds,
            sweeps,
        )
        if diagnostics:
            table = diagnose(fit.functionals())
            fit = replace(fit, diagnostics=table)
            check_convergence(table, chains, stacklevel=4)
        return fit

    # ------------------------------------------------------------- shapes
    @property
    def chains(self) -> int:
        return int(self.atoms.shape[0])

    @property
    def draws(self) -> int:
        return int(self.atoms.shape[1])

    @property
    def sweeps_per_second(self) -> float:
        return self.sweeps / self.seconds if self.seconds > 0 else float("inf")

    def weights(self) -> np.ndarray:
        """(chains, draws, A) weights of the sorted atoms."""
        return np.diff(self.cumw, axis=-1, prepend=0.0)

    def _flat(self) -> tuple[np.ndarray, np.ndarray]:
        a = self.atoms.reshape(-1, self.atoms.shape[-1])
        c = self.cumw.reshape(-1, self.cumw.shape[-1])
        return np.ascontiguousarray(a), np.ascontiguousarray(c)

    def _shape(self, arr: np.ndarray) -> np.ndarray:
        return arr.reshape(self.chains, self.draws, *arr.shape[1:])

    def projected(self) -> DPMixtureFit:
        """The posterior of the law of clip(X, -r, r): what a clipping mechanism identifies.

        Beyond [-r, r] the data only tell how much mass lies on each side, not where;
        projecting the atoms removes that part of the prior from the functionals.
        """
        r = getattr(self.model.mechanism, "r", None)
        if r is None:
            raise ValueError("projected() needs a mechanism with a clipping bound r")
        return replace(self, atoms=np.clip(self.atoms, -r, r), diagnostics=None)

    # ------------------------------------------------------------- functionals (draws)
    def mean_draws(self) -> np.ndarray:
        return np.sum(self.weights() * self.atoms, axis=-1)  # type: ignore[no-any-return]

    def var_draws(self) -> np.ndarray:
        w = self.weights()
        m = np.sum(w * self.atoms, axis=-1, keepdims=True)
        return np.sum(w * (self.atoms - m) ** 2, axis=-1)  # type: ignore[no-any-return]

    def quantile_draws(self, q: Any) -> np.ndarray:
        """(chains, draws) or (chains, draws, len(q)) draws of the q-quantile of P."""
        qs = np.atleast_1d(np.asarray(q, dtype=float))
        for v in qs:
            check_probability(float(v), "q", open_interval=True)
        a, c = self._flat()
        out = self._shape(kernels.quantile_draws(a, c, qs))
        return out[..., 0] if np.ndim(q) == 0 else out

    def cdf_draws(self, grid: Any) -> np.ndarray:
        """(chains, draws, len(grid)) draws of F(t) = P((-inf, t])."""
        g = check_array(grid, "grid", ndim=None)
        flat = np.ravel(g)
        order = np.argsort(flat)
        a, c = self._flat()
        vals = kernels.cdf_draws(a, c, np.ascontiguousarray(flat[order]))
        out = np.empty_like(vals)
        out[:, order] = vals
        return self._shape(out).reshape(self.chains, self.draws, *g.shape)

    def _bandwidth(self, bandwidth: float | None) -> float:
        if bandwidth is not None:
            return check_positive(bandwidth, "bandwidth")
        sd = float(np.sqrt(np.mean(self.var_draws())))
        return max(sd, 1e-12) * 1.06 * max(self.n, 2) ** (-0.2)

    def density_draws(self, grid: Any, bandwidth: float | None = None) -> np.ndarray:
        """Draws of the density of P smoothed by a Normal kernel of sd ``bandwidth``.

        A Dirichlet-process draw is discrete, so its density exists only after
        smoothing; the default bandwidth is 1.06 sd(P) n^(-1/5).
        """
        g = check_array(grid, "grid")
        h = self._bandwidth(bandwidth)
        a, c = self._flat()
        w = np.diff(c, axis=-1, prepend=0.0)
        out = kernels.smoothed_density_draws(a, w, np.ascontiguousarray(g, dtype=float), h)
        return self._shape(out / (h * np.sqrt(2 * np.pi)))

    def functionals(self) -> dict[str, np.ndarray]:
        """(chain, draw) arrays of the functionals the diagnostics look at."""
        out = {"mean": self.mean_draws(), "sd": np.sqrt(self.var_draws())}
        qd = self.quantile_draws(np.array(_SUMMARY_QUANTILES))
        for i, q in enumerate(_SUMMARY_QUANTILES):
            out["median" if q == 0.5 else f"q{q:g}"] = qd[..., i]
        out["n_clusters"] = self.n_clusters.astype(float)
        if self.model.alpha_prior is not None:
            out["alpha"] = self.alpha
        if self.model.base_prior is not None:
            out["base_mu"], out["base_sigma"] = self.base[0], self.base[1]
        return out

    # ------------------------------------------------------------- point estimates
    def mean(self) -> float:
        """Posterior mean of the mean of P."""
        return float(np.mean(self.mean_draws()))

    def var(self) -> float:
        """Posterior mean of the variance of P."""
        return float(np.mean(self.var_draws()))

    def std(self) -> float:
        return float(np.sqrt(self.var()))

    def quantile(self, q: Any) -> Any:
        """Posterior mean of the q-quantile(s) of P."""
        d = self.quantile_draws(q)
        return float(np.mean(d)) if np.ndim(q) == 0 else np.mean(d, axis=(0, 1))

    def median(self) -> float:
        return float(self.quantile(0.5))

    def cdf(self, grid: Any) -> np.ndarray:
        """Posterior mean of F at ``grid``: the CDF of E[P | Z]."""
        return np.mean(self.cdf_draws(grid), axis=(0, 1))  # type: ignore[no-any-return]

    def density(self, grid: Any, bandwidth: float | None = None) -> np.ndarray:
        """Posterior mean of the smoothed density (see :meth:`density_draws`)."""
        return np.mean(self.density_draws(grid, bandwidth), axis=(0, 1))  # type: ignore[no-any-return]

    def ppf(self, q: Any) -> Any:
        """scipy.stats-style alias of :meth:`quantile`."""
        return self.quantile(q)

    def pdf(self, grid: Any, bandwidth: float | None = None) -> np.ndarray:
        """scipy.stats-style alias of :meth:`density`."""
        return self.density(grid, bandwidth)

    # ------------------------------------------------------------- uncertainty
    @staticmethod
    def _eti(draws: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        level = check_probability(level, "level", open_interval=True)
        flat = draws.reshape(-1, *draws.shape[2:])
        lo, hi = np.quantile(flat, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return lo, hi

    def interval(self, functional: str = "mean", level: float = 0.95) -> tuple[float, float]:
        """Equal-tailed credible interval of a functional (a key of :meth:`functionals`)."""
        funcs = self.functionals()
        if functional not in funcs:
            raise ValueError(f"functional must be one of {sorted(funcs)}, got {functional!r}")
        lo, hi = self._eti(funcs[functional], level)
        return float(lo), float(hi)

    def cdf_band(
        self, grid: Any, level: float = 0.95, kind: str = "pointwise"
    ) -> tuple[np.ndarray, np.ndarray]:
        """Credible band of F at ``grid``: ``"pointwise"`` (equal-tailed at each point) or
        ``"simultaneous"`` (:func:`simultaneous_band`: contains whole draws of F on the grid
        with posterior probability ``level``)."""
        if kind == "pointwise":
            return self._eti(self.cdf_draws(grid), level)
        if kind == "simultaneous":
            d = self.cdf_draws(grid)
            return simultaneous_band(d.reshape(-1, *d.shape[2:]), level)
        raise ValueError(f"kind must be 'pointwise' or 'simultaneous', got {kind!r}")

    def cdf_median(self, grid: Any) -> np.ndarray:
        """Pointwise posterior median of F at ``grid``: the Bayes estimate under the loss
        W1 = integral |F - G| (it minimises E|F(t) - G(t)| at each t; a CDF, since the
        median is monotone)."""
        return np.median(self.cdf_draws(grid), axis=(0, 1))  # type: ignore[no-any-return]

    def density_band(
        self, grid: Any, level: float = 0.95, bandwidth: float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise equal-tailed credible band of the smoothed density at ``grid``."""
        return self._eti(self.density_draws(grid, bandwidth), level)

    # ------------------------------------------------------------- reporting
    def summary(self, level: float = 0.95) -> Any:
        """Posterior mean, sd, credible interval, R-hat and ESS of each functional (DataFrame)."""
        import pandas as pd

        funcs = self.functionals()
        diag = self.diagnostics if self.diagnostics is not None else diagnose(funcs)
        rows = []
        for name, d in funcs.items():
            lo, hi = self._eti(d, level)
            rows.append(
                {
                    "functional": name,
                    "mean": float(np.mean(d)),
                    "sd": float(np.std(d)),
                    f"eti_{level:g}_lo": float(lo),
                    f"eti_{level:g}_hi": float(hi),
                }
            )
        table = pd.DataFrame(rows).set_index("functional")
        return table.join(diag)

    def to_inference_data(self, grid: Any = None) -> Any:
        """ArviZ InferenceData: functionals (and the CDF on ``grid``) as posterior variables."""
        from dpbayes.nonparametric.diagnostics import _arviz

        az = _arviz()
        post: dict[str, np.ndarray] = dict(self.functionals())
        coords: dict[str, Any] = {}
        dims: dict[str, list[str]] = {}
        if grid is not None:
            g = check_array(grid, "grid")
            post["cdf"] = self.cdf_draws(g)
            coords["grid"] = g
            dims["cdf"] = ["grid"]
        post["atoms"] = self.atoms
        post["weights"] = self.weights()
        dims["atoms"] = dims["weights"] = ["atom"]
        attrs = {
            "model": "DP mixture on locally private data (Ayed, Battiston & Di Benedetto 2020)",
            "n": self.n,
            "guarantee": self._guarantee_text(),
        }
        return az.from_dict(posterior=post, coords=coords, dims=dims, attrs=attrs)

    def _guarantee_text(self) -> str:
        if self.guarantee is None:
            return NO_GUARANTEE
        return self.guarantee.describe()

    def __repr__(self) -> str:
        g = self._guarantee_text()
        return (
            f"DPMixtureFit(n={self.n}, chains={self.chains}, draws={self.draws}, "
            f"mean={self.mean():.4g}, {g})"
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        lo, hi = np.quantile(self.mean_draws(), [0.025, 0.975])
        g = self._guarantee_text()
        return "DPMixtureFit (Dirichlet-process mixture on locally private data)", [
            ("observations", str(self.n)),
            ("MCMC", f"{self.chains} chains x {self.draws} draws, {self.seconds:.1f} s"),
            ("mean", f"{self.mean():.4g}, 95% interval {display.interval(lo, hi)}"),
            ("clusters", f"{np.mean(self.n_clusters):.1f} on average"),
            ("guarantee", g),
            ("table", ".summary() for the functionals; .to_inference_data() for ArviZ"),
        ]

    def _repr_html_(self) -> str:
        return display.html(self)
