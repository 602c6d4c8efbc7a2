"""Bayesian nonparametric inference from locally privatised data (paper 001).

Ayed, Battiston & Di Benedetto, "A Bayesian Nonparametric Approach to Differentially
Private Data" (PSD 2020). Each person's value X_i is released as Z_i ~ Q(. | X_i) by a
known local mechanism; the distribution P of X is given a Dirichlet-process prior and
its posterior is sampled by Gibbs over the latent X's::

    from dpbayes.nonparametric import DPMixture, LocalLaplace
    mech = LocalLaplace(epsilon=1.0, r=3.0)
    z = mech.privatize(x)                    # data owner: secure noise, carries a Guarantee
    fit = DPMixture(mechanism=mech).fit(z, draws=2000, chains=4, rng=0)
    fit.cdf(grid), fit.density(grid), fit.mean(), fit.quantile(0.5), fit.to_inference_data()
    calibrate_bands(fit, grid, 0.95)         # bands with frequentist coverage 0.95 (refits)

:class:`LocalLaplace` and :class:`LocalGaussian` are likelihood models of *local*
mechanisms (with clipping to [-r, r]); they release through :mod:`dpbayes.privacy`'s
:class:`~dpbayes.privacy.LaplaceMechanism` / :class:`~dpbayes.privacy.GaussianMechanism`.
"""

from dpbayes.nonparametric.base import BasePrior
from dpbayes.nonparametric.calibration import BandCalibration, calibrate_bands
from dpbayes.nonparametric.diagnostics import ConvergenceWarning
from dpbayes.nonparametric.fit import DPMixtureFit
from dpbayes.nonparametric.mechanisms import CustomMechanism, LocalGaussian, LocalLaplace
from dpbayes.nonparametric.privatize import (
    PrivatizedColumn,
    mechanism_of,
    privatize,
    read_privatized,
)
from dpbayes.nonparametric.sampler import DPMixture

__all__ = [
    "BandCalibration",
    "BasePrior",
    "ConvergenceWarning",
    "CustomMechanism",
    "DPMixture",
    "DPMixtureFit",
    "LocalGaussian",
    "LocalLaplace",
    "PrivatizedColumn",
    "calibrate_bands",
    "mechanism_of",
    "privatize",
    "read_privatized",
]
