"""d3p's DP variational inference on the glm comparison's data sets (a separate environment).

    PYTHON_WITH_D3P benchmarks/baselines/d3p_glm.py CONFIG.json OUT.csv

Runs under a Python that has d3p (no dpbayes import): the caller,
``benchmarks/bench_glm_baselines.py``, writes CONFIG.json with the eps grid, delta, the
public bounds, the data sets' sources and the train/test indices of every split, so that
d3p sees the same rows, scaled the same way, as dpbayes and diffprivlib.

Model and inference (d3p 0.2.0's documented API, as in its README and
``examples/logistic_regression.py``):

* logistic regression: w ~ N(0, I), intercept ~ N(0, 1), y ~ Bernoulli(sigmoid(x'w + b))
  on the features scaled to [-1, 1] by the public bounds (clipped);
* linear regression: the same priors, label scaled to [-1, 1] by its public bounds,
  y ~ N(x'w + b, s^2) with s ~ HalfNormal(1);
* guide: ``numpyro.infer.autoguide.AutoDiagonalNormal`` (Gaussian mean field), its
  location started at the prior means (``init_to_mean``: w = 0, b = 0, s = 0.8; the
  default, medians of 15 prior draws, starts the weights at random values of sd ~0.3);
* ``d3p.minibatch.subsample_batchify_data`` (uniform minibatches without replacement,
  batch size fixed), ``d3p.dputil.approximate_sigma`` (Fourier accountant, substitute
  relation, the same neighbouring relation as dpbayes' default) with
  ``force_smaller=True`` so the accountant's eps never exceeds the target,
  ``d3p.svi.DPSVI`` with Adam and per-example clipping, noise from ``d3p.random``
  (ChaCha20, seeded: reproducible).

Predictions use the posterior mean (the guide's location). For logistic regression the
class is that of the posterior predictive too (under a Gaussian guide x'w is Gaussian
and symmetric about its mean, so E sigmoid(x'w) > 1/2 exactly when the mean logit is
> 0); for linear regression the predictive mean is x'E[w] + E[b], clipped to the label
bounds and mapped back, as dpbayes' estimator does.

Writes one row per (dataset, eps, rep, metric): accuracy (logistic), mse and mse/ols
(linear; least squares with an intercept on the raw training features), with the
noise multiplier, the accountant's eps, the settings, and wall seconds: ``fit_seconds``
(training and prediction; the first fit per data set also compiles), the
``calibration_seconds`` of ``approximate_sigma`` for that (data set, eps) (once, reused
across splits of the same size) and ``seconds`` = both, what one fit costs a user.

d3p 0.2.0 needs jax-chacha-prng 1.4.3, which needs jax <= 0.4.25 and numpy < 2 (with jax
0.7 ``import d3p.svi`` fails: ``jax.core.Primitive`` is gone). A set that works:
``pip install d3p==0.2.0 "jax[cpu]==0.4.25" numpyro==0.14.0 "numpy<2" "scipy<1.13"
scikit-learn pandas``.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

#: Defaults per model kind (the caller's CONFIG["settings"][dataset] overrides any):
#: Adam's learning rate, per-example clipping threshold, batch size, epochs (passes over
#: the training set; iterations = epochs / q, q = batch / n).
SETTINGS: dict[str, dict[str, float]] = {
    "logistic": {"epochs": 100, "batch_size": 50, "learning_rate": 0.05, "clipping_threshold": 0.5},
    "linear": {"epochs": 50, "batch_size": 25, "learning_rate": 0.02, "clipping_threshold": 1.0},
}


def load(spec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Features and target of one data set, as the caller describes it."""
    source = spec["source"]
    if source == "sklearn:breast_cancer":
        from sklearn.datasets import load_breast_cancer

        x, y = load_breast_cancer(return_X_y=True)
    elif source == "sklearn:diabetes":
        from sklearn.datasets import load_diabetes

        x, y = load_diabetes(return_X_y=True)
    elif source == "csv":
        import pandas as pd

        df = pd.read_csv(spec["path"])
        x = df[list(spec["features"])].to_numpy(float)
        y = (df[spec["target"]].to_numpy(float) > spec["positive_above"]).astype(int)
    else:
        raise ValueError(f"unknown source {source!r}")
    if len(y) != spec["rows"]:
        raise ValueError(f"{source}: {len(y)} rows here, {spec['rows']} at the caller")
    return np.asarray(x, dtype=float), np.asarray(y, dtype=float)


def scaled(x: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    lo, hi = bounds[:, 0], bounds[:, 1]
    return np.clip((x - (lo + hi) / 2) / np.maximum((hi - lo) / 2, 1e-12), -1.0, 1.0)


def make_model(kind: str) -> Any:
    import jax.numpy as jnp
    import numpyro.distributions as dist
    from numpyro.primitives import plate, sample

    def model(x: Any, y: Any = None, num_obs_total: int | None = None) -> None:
        batch, d = jnp.shape(x)
        n = batch if num_obs_total is None else num_obs_total
        w = sample("w", dist.Normal(jnp.zeros(d), 1.0).to_event(1))
        b = sample("intercept", dist.Normal(0.0, 1.0))
        mean = x @ w + b
        if kind == "logistic":
            with plate("batch", n, batch):
                sample("obs", dist.Bernoulli(logits=mean), obs=y)
        else:
            s = sample("noise_sd", dist.HalfNormal(1.0))
            with plate("batch", n, batch):
                sample("obs", dist.Normal(mean, s), obs=y)

    return model


class Fitter:
    """One compiled DPSVI training run per (data set, training size): data, noise
    multiplier, number of iterations and key are arguments, not constants."""

    def __init__(self, kind: str, n_train: int, d: int, settings: dict[str, float]) -> None:
        import d3p.random as rng_suite
        import jax
        import numpyro.optim as optim
        from d3p.minibatch import subsample_batchify_data
        from d3p.svi import DPSVI
        from numpyro.infer import Trace_ELBO
        from numpyro.infer.autoguide import AutoDiagonalNormal
        from numpyro.infer.initialization import init_to_mean

        self.kind, self.n, self.d = kind, n_train, d
        self.batch = int(settings["batch_size"])
        self.q = self.batch / n_train
        self.model = make_model(kind)
        self.guide = AutoDiagonalNormal(self.model, init_loc_fn=init_to_mean)
        guide, model = self.guide, self.model
        lr, clip, batch = settings["learning_rate"], settings["clipping_threshold"], self.batch

        def train(key: Any, x: Any, y: Any, dp_scale: Any, num_iter: Any) -> Any:
            init, get_batch = subsample_batchify_data((x, y), batch_size=batch)
            svi = DPSVI(
                model,
                guide,
                optim.Adam(lr),
                Trace_ELBO(),
                clipping_threshold=clip,
                dp_scale=dp_scale,
                rng_suite=rng_suite,
                num_obs_total=n_train,
            )
            init_key, batch_key = rng_suite.split(key, 2)
            _, state = init(batch_key)
            svi_state = svi.init(init_key, *get_batch(0, state))

            def step(i: Any, s: Any) -> Any:
                return svi.update(s, *get_batch(i, state))[0]

            svi_state = jax.lax.fori_loop(0, num_iter, step, svi_state)
            return svi.get_params(svi_state)

        self._train = jax.jit(train)
        self._rng = rng_suite

    def fit(self, seed: int, x: np.ndarray, y: np.ndarray, dp_scale: float, num_iter: int) -> Any:
        import jax

        params = self._train(self._rng.PRNGKey(seed), x, y, dp_scale, num_iter)
        params = jax.tree_util.tree_map(np.asarray, params)
        return self.guide.median(params)  # Gaussian guide: median = mean on these sites


def calibrate(eps: float, delta: float, q: float, num_iter: int) -> tuple[float, float, float]:
    """(noise multiplier, the accountant's eps, seconds) by d3p's Fourier accountant."""
    from d3p.dputil import approximate_sigma

    t0 = time.perf_counter()
    sigma, got, _ = approximate_sigma(eps, delta, q, num_iter, force_smaller=True)
    return float(sigma), float(got), time.perf_counter() - t0


def run(config: dict[str, Any], out: Path) -> None:
    from importlib.metadata import version

    rows: list[dict[str, Any]] = []
    delta = float(config["delta"])
    for name, spec in config["datasets"].items():
        kind = spec["kind"]
        settings = {**SETTINGS[kind], **config.get("settings", {}).get(name, {})}
        x_raw, y_raw = load(spec)
        x_all = scaled(x_raw, np.asarray(spec["bounds"], dtype=float)).astype(np.float32)
        if kind == "linear":
            lo, hi = spec["label_bounds"]
            y_all = ((np.clip(y_raw, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2)).astype(np.float32)
        else:
            y_all = y_raw.astype(np.float32)
        fitters: dict[int, Fitter] = {}
        sigmas: dict[tuple[int, float], tuple[float, float, float]] = {}
        for rep, sp in enumerate(spec["splits"]):
            tr, te = np.asarray(sp["train"]), np.asarray(sp["test"])
            fitter = fitters.get(len(tr))
            if fitter is None:
                fitter = fitters[len(tr)] = Fitter(kind, len(tr), x_all.shape[1], settings)
            num_iter = round(settings["epochs"] / fitter.q)
            if kind == "linear":
                design = np.column_stack([np.ones(len(tr)), x_raw[tr]])
                coef = np.linalg.lstsq(design, y_raw[tr], rcond=None)[0]
                ols = float(
                    np.mean(
                        (np.column_stack([np.ones(len(te)), x_raw[te]]) @ coef - y_raw[te]) ** 2
                    )
                )
            for k, eps in enumerate(config["epsilons"]):
                key = (len(tr), eps)
                if key not in sigmas:
                    sigmas[key] = calibrate(eps, delta, fitter.q, num_iter)
                sigma, got, cal_s = sigmas[key]
                t0 = time.perf_counter()
                post = fitter.fit(int(sp["seed"]) * 1000 + k, x_all[tr], y_all[tr], sigma, num_iter)
                w, b = np.asarray(post["w"], dtype=float), float(post["intercept"])
                mean = x_all[te].astype(float) @ w + b
                fit_s = time.perf_counter() - t0
                base = {
                    "dataset": name,
                    "method": "d3p DPVI",
                    "epsilon": eps,
                    "delta": delta,
                    "rep": rep,
                    "noise_multiplier": round(sigma, 5),
                    "accountant_epsilon": round(got, 5),
                    "epochs": settings["epochs"],
                    "iterations": num_iter,
                    "batch_size": fitter.batch,
                    "learning_rate": settings["learning_rate"],
                    "clipping_threshold": settings["clipping_threshold"],
                    "fit_seconds": round(fit_s, 3),
                    "calibration_seconds": round(cal_s, 3),
                    "seconds": round(fit_s + cal_s, 3),
                }
                if kind == "logistic":
                    acc = float(np.mean((mean > 0).astype(float) == y_all[te]))
                    rows.append({**base, "metric": "accuracy", "value": acc})
                else:
                    lo, hi = spec["label_bounds"]
                    pred = np.clip(mean, -1, 1) * (hi - lo) / 2 + (lo + hi) / 2
                    mse = float(np.mean((pred - y_raw[te]) ** 2))
                    rows.append({**base, "metric": "mse", "value": mse})
                    rows.append({**base, "metric": "mse/ols", "value": mse / ols})
                print(
                    f"d3p {name} eps={eps} rep={rep}: {rows[-1]['metric']}={rows[-1]['value']:.4f}"
                    f" sigma={sigma:.3g} fit {fit_s:.1f} s + calibration {cal_s:.1f} s",
                    flush=True,
                )
    versions = {p: version(p) for p in ("d3p", "jax", "numpyro")}
    for r in rows:
        r["versions"] = " ".join(f"{k} {v}" for k, v in versions.items())
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[2].strip())
    try:
        import d3p.svi  # noqa: F401
    except Exception as exc:  # e.g. jax too new for jax-chacha-prng
        sys.exit(f"d3p does not import here ({type(exc).__name__}: {exc})"[:300])
    run(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))


if __name__ == "__main__":
    main()
