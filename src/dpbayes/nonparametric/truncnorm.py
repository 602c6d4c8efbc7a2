"""Mixtures of truncated Normals with disjoint supports, in log space.

The exact conditional of a cluster value in paper 001 (Appendix A for the Laplace
mechanism with clipping; the conjugate update for the Gaussian mechanism) is a mixture
of Normals N(mean_j, sd_j^2) restricted to intervals [lo_j, hi_j) with weights
exp(const_j) * (Phi((hi_j - mean_j)/sd_j) - Phi((lo_j - mean_j)/sd_j)). Everything here is
computed with ``log_ndtr`` so that weights of 10^-300 and less stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from dpbayes.nonparametric import kernels, kernels_truncnorm

__all__ = ["Intervals", "log_diff_ndtr"]


def log_diff_ndtr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a <= b, accurate in both tails (-inf for empty intervals)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    upper = a > 0  # both ends in the upper tail: use Phi(-a) - Phi(-b)
    hi = np.where(upper, -a, b)
    lo = np.where(upper, -b, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        lhi = special.log_ndtr(hi)
        llo = special.log_ndtr(lo)
        out = lhi + np.log1p(-np.exp(llo - lhi))
    return np.where(lo >= hi, -np.inf, out)


@dataclass(frozen=True)
class Intervals:
    """Truncated-Normal pieces of the conditionals of ``k`` clusters.

    Piece j belongs to cluster ``seg[j]`` (pieces of a cluster are contiguous and
    ordered left to right), lives on [lo_j, hi_j) and has unnormalised log mass
    ``const_j + log(Phi((hi_j - mean_j)/sd_j) - Phi((lo_j - mean_j)/sd_j))``.
    """

    seg: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    const: np.ndarray
    k: int

    def log_mass(self) -> np.ndarray:
        return self.const + log_diff_ndtr(
            (self.lo - self.mean) / self.sd, (self.hi - self.mean) / self.sd
        )

    def log_weights(self) -> np.ndarray:
        """Normalised log weights of the pieces within each cluster."""
        lm = self.log_mass()
        norm = kernels.segment_logsumexp(lm, self.seg.astype(np.int64), self.k)
        return lm - norm[self.seg]

    def sample(self, gumbel: Any, uniform: Any) -> np.ndarray:
        """One draw per cluster: the piece by Gumbel-max, then the truncated Normal by inverse CDF.

        ``gumbel`` has one standard Gumbel draw per piece, ``uniform`` one U(0,1) per cluster.
        """
        return kernels_truncnorm.sample_pieces(  # type: ignore[no-any-return]
            self.seg.astype(np.int64),
            self.lo,
            self.hi,
            self.mean,
            self.sd,
            self.const,
            self.k,
            np.asarray(gumbel, dtype=float),
            np.asarray(uniform, dtype=float),
        )

    def logpdf(self, x: np.ndarray, cluster: int = 0) -> np.ndarray:
        """Normalised log density of cluster ``cluster``'s conditional at ``x``."""
        x = np.asarray(x, dtype=float)
        sel = np.flatnonzero(self.seg == cluster)
        lw = self.log_weights()[sel]
        lo, hi, m, s = self.lo[sel], self.hi[sel], self.mean[sel], self.sd[sel]
        lm = log_diff_ndtr((lo - m) / s, (hi - m) / s)
        j = np.clip(np.searchsorted(hi, x, side="right"), 0, len(sel) - 1)
        z = (x - m[j]) / s[j]
        return lw[j] - lm[j] - 0.5 * z * z - np.log(s[j] * np.sqrt(2 * np.pi))

    def cdf(self, x: np.ndarray, cluster: int = 0) -> np.ndarray:
        """CDF of cluster ``cluster``'s conditional at ``x``."""
        x = np.asarray(x, dtype=float)
        sel = np.flatnonzero(self.seg == cluster)
        w = np.exp(self.log_weights()[sel])
        lo, hi, m, s = self.lo[sel], self.hi[sel], self.mean[sel], self.sd[sel]
        lm = log_diff_ndtr((lo - m) / s, (hi - m) / s)
        xc = np.clip(x[..., None], lo, hi)
        with np.errstate(invalid="ignore"):
            part = np.exp(log_diff_ndtr((lo - m) / s, (xc - m) / s) - lm)
        part = np.where(np.isfinite(lm), part, 0.0)
        return np.asarray(np.sum(w * part, axis=-1))
