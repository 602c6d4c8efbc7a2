"""Checker rules for the monad and inference (paper 002 §5-6).

Ran and Infer move bounds between symbolic refinements and monadic indices; UnitM
rejects an un-noised private value; BindM composes divergence indices (Barthe & Olmedo
2013), and charges nothing for a draw the body never reads; Observe/Learn bound
neighbouring posteriors by Lemmas 6.1-6.3 (:mod:`dpbayes.programs.lemmas`) and the data
processing inequality, for a public prior that is a known distribution or its posterior
on public data. See ``PROOF.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpbayes.models import Beta, Dirichlet, Normal
from dpbayes.programs import lemmas, outward
from dpbayes.programs.certificate import _CAP, _FDIV, INF, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why, public_bound, record_bound
from dpbayes.programs.interpreter import (
    concentration_cap,
    normal_variance,
    public_distribution,
    public_value,
)
from dpbayes.programs.rules_distributions import draw_shape
from dpbayes.programs.terms import MAX_CONCENTRATION, Term

__all__ = ["MonadRules"]

_CONJUGATE = {"bernoulli": "beta", "categorical": "dirichlet", "normal": "normal"}
#: a prior parameter plus the counts must stay below 2^53, where doubles count exactly
_EXACT_COUNTS = 2**53
#: the largest total concentration of a Beta/Dirichlet posterior (prior plus counts) a
#: checked program builds (``_check_concentration``, ``PROOF.md`` §4)
MAX_POSTERIOR = MAX_CONCENTRATION + lemmas.MAX_LEMMA_N


@dataclass(frozen=True)
class PriorInfo:
    """What the checker knows of a public prior: a known distribution ``base`` observed
    on ``extra`` public records (their values unknown); for a Normal, ``var`` is the
    variance after them (it does not depend on their values)."""

    base: Any
    extra: int
    var: float | None = None


class MonadRules(CheckerBase):
    """Ran, Infer, UnitM, BindM, Observe, Learn."""

    def rule_ran(self, t: Term) -> tuple[Bound, Step]:
        d, i = self.visit(t.args[0])
        s = self.step("Ran (refinement -> index)", f"ran([{i}])")
        shape = draw_shape(d.family, d.param_shape)
        extra: dict[str, Any] = {"family": d.family, "param_shape": d.param_shape, "shape": shape}
        if d.equal:
            return public_bound("monad", **extra), s
        m = {k: d.get(k) for k in (*_FDIV, "L1", "L2")}
        m["eps"], m["delta"] = INF, 0.0
        s.note = "a draw from a distribution that depends on private data has no eps bound"
        return Bound("monad", metrics=m, coords=d.coords, blame=s, **extra), s

    def rule_infer(self, t: Term) -> tuple[Bound, Step]:
        m, i = self.visit(t.args[0])
        s = self.step("Infer (index -> refinement)", f"infer([{i}])")
        extra: dict[str, Any] = {"family": m.family, "param_shape": m.param_shape}
        if m.equal:
            return public_bound("sym", **extra), s
        metrics = {k: m.get(k) for k in (*_FDIV, "L1", "L2")}
        if m.coords is not None:
            metrics["L1"] = min(metrics["L1"], outward.add(*m.coords))
            metrics["L2"] = min(metrics["L2"], outward.hypot(m.coords))
        return Bound("sym", metrics=metrics, coords=m.coords, blame=m.blame, **extra), s

    def rule_unit(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        s = self.step("UnitM", f"return([{i}])")
        if v.equal:
            return public_bound("monad", v.shape if v.kind == "value" else None), s
        what = v.text()
        return self.fail(
            s,
            "monad",
            f"return releases [{i}], which depends on private data ({what}), without noise",
            metrics={"eps": INF, "delta": 0.0, "hellinger": 1.0, "tv": 1.0},
            shape=v.shape if v.kind == "value" else None,
        ), s

    def rule_bind(self, t: Term) -> tuple[Bound, Step]:
        m_t, x, body_t = t.args
        m, im = self.visit(m_t)
        with self.binding(x, public_bound("value", m.shape)):
            body, ib = self.visit(body_t)
        s = self.step(
            "BindM (composition, Barthe & Olmedo)", f"mlet {t.info['var']} = [{im}] in [{ib}]"
        )
        if x.uid not in body_t.free:
            s.note = f"{t.info['var']} is not used: the draw [{im}] is discarded, not released"
            return body, s
        if m.equal and body.equal:
            return public_bound("monad", body.shape), s
        metrics = {
            k: min(_CAP.get(k, INF), outward.add(m.get(k), body.get(k)))
            for k in ("eps", "delta", *_FDIV)
        }
        metrics["delta"] = min(metrics["delta"], 1.0)
        return Bound(
            "monad",
            metrics=metrics,
            blame=self.blame_of(m, body, metric="eps"),
            shape=body.shape,
        ), s

    # ---------------------------------------------------------------- observe / learn
    def _prior_info(self, prior_t: Term) -> PriorInfo | None:
        """The public prior as a known distribution and a number of public records."""
        if not prior_t.free:
            try:
                return PriorInfo(public_distribution(prior_t), 0, None)
            except (TypeError, ValueError):
                pass
        if prior_t.op == "ran":
            d = prior_t.args[0]
            return self._prior_info(d.args[0]) if d.op == "infer" else None
        if prior_t.op not in ("observe", "learn"):
            return None
        if prior_t.op == "observe":
            inner_t, lik, data_t = prior_t.args[0], prior_t.args[2], prior_t.args[3]
        else:
            data_t, inner_t, lik = prior_t.args[0], prior_t.args[1], prior_t.args[3]
        inner = self._prior_info(inner_t)
        data, _ = self.visit(data_t)
        if inner is None or not data.equal or data.kind != "value" or data.shape is None:
            return None
        size = math.prod(data.shape)
        var = None
        if isinstance(inner.base, Normal):
            kv = self._known_variance(lik)
            v0 = float(inner.base.sd) ** 2 if inner.var is None else inner.var
            if kv is None:
                return None
            # rounded up: every distance of the lemma increases with the prior variance
            var = outward.up(1 / (1 / Fraction(v0) + size / Fraction(kv)))
        return PriorInfo(inner.base, inner.extra + size, var)

    @staticmethod
    def _known_variance(lik: Term) -> float | None:
        if lik.args[1].free:
            return None
        try:  # the variance the run uses: projected onto [TINY, NORMAL_VAR_MAX]
            return normal_variance(public_value(lik.args[1]))
        except (TypeError, ValueError):
            return None

    def _check_domain(self, data: Bound, idata: int, fam: str, prior: Bound, s: Step) -> None:
        """Refuse private data a run's conjugate update would refuse on some data sets only.

        A Bernoulli datum must be 0/1 and a categorical one an index below the Dirichlet's
        size, in every run: the input's boolean or category records, or a value the checker
        proves integer-valued in 0..levels-1 (``Bound.levels``: an ``eq_score``, a record
        of ``map_records``). Public data are the same in both runs (a failure does not
        depend on the private input); a Normal likelihood takes any (finite) real.
        """
        if fam == "normal" or data.equal:
            return
        if data.kind == "db":
            assert data.db is not None
            info = data.db
            if info["record"] == "real":
                self.reject(
                    s,
                    f"a {fam} likelihood cannot observe real records: a run would fail on "
                    "some data sets and not on others",
                )
            levels: int | None = 2 if info["record"] == "bool" else int(info["k"])
            what, verb = f"the {info['record']} records", ("are", "take")
        else:
            levels = data.levels
            what, verb = f"the private datum [{idata}]", ("is", "takes")
        size = None
        if fam == "categorical" and prior.param_shape is not None:
            size = math.prod(prior.param_shape)
        allowed = 2 if fam == "bernoulli" else size
        if levels is None or allowed is None or levels > allowed:
            if levels is None:
                cause = f"{verb[0]} not provably integer-valued (only eq_score and records are)"
            elif allowed is None:
                cause = (
                    f"{verb[0]} observed under a Dirichlet prior of a size unknown when checking"
                )
            else:
                cause = f"{verb[1]} values up to {levels - 1}, beyond 0..{allowed - 1}"
            need = "0/1" if fam == "bernoulli" else "a category index of the prior"
            self.reject(
                s,
                f"{what} {cause}: a {fam} likelihood needs {need}, and a run would fail "
                "on some data sets and not on others",
            )

    @staticmethod
    def _size(data: Bound) -> int | None:
        """How many records ``data`` is (the input's n, or the size of a value's shape)."""
        if data.kind == "db":
            assert data.db is not None
            return int(data.db["n"])
        return None if data.shape is None else math.prod(data.shape)

    def _prior_concentration(self, prior_t: Term) -> Fraction:
        """An upper bound on the total concentration of the Beta/Dirichlet prior a run
        builds for ``prior_t`` (the sum of its parameters).

        A closed prior is evaluated by the run's own code (``public_distribution``): the
        exact sum of the parameters the run uses. Otherwise, by its form: ``ran`` of a
        ``dist`` term is projected onto m parameters of at most MAX_CONCENTRATION / m
        each (``concentration_cap``), so at most m fl(MAX_CONCENTRATION / m); an observe
        or learn adds its data's records to its prior's bound; ``ran(infer(m))`` is m's.
        Any other prior fails every run alike (``Runtime.symbolic``): 0.
        """
        if not prior_t.free:
            try:
                d = public_distribution(prior_t)
            except (TypeError, ValueError):
                d = None
            if isinstance(d, Beta | Dirichlet):
                params = [d.a, d.b] if isinstance(d, Beta) else d.alpha.tolist()
                return sum((Fraction(x) for x in params), Fraction(0))
        if prior_t.op == "ran":
            d = prior_t.args[0]
            if d.op == "infer":
                return self._prior_concentration(d.args[0])
            b, _ = self.visit(d)
            m = 2 if d.info.get("family") == "beta" else math.prod(b.param_shape or (1,))
            return m * Fraction(concentration_cap(max(m, 1)))
        if prior_t.op not in ("observe", "learn"):
            return Fraction(0)
        if prior_t.op == "observe":
            inner_t, data_t = prior_t.args[0], prior_t.args[3]
        else:
            inner_t, data_t = prior_t.args[1], prior_t.args[0]
        # this link is public (prior_t is equal in both runs), so _check_concentration
        # has checked it when the prior was visited, and refused an unknown size there
        size = self._size(self.visit(data_t)[0])
        assert size is not None
        return self._prior_concentration(inner_t) + size

    def _check_concentration(self, s: Step, prior_t: Term, data: Bound, fam: str) -> None:
        """Refuse a Beta/Dirichlet posterior of total concentration above MAX_POSTERIOR.

        The bound on the prior's total (:meth:`_prior_concentration`) plus the records
        observed here (each adds 1 to one parameter), public or private data alike, must
        be at most MAX_POSTERIOR = MAX_CONCENTRATION + MAX_LEMMA_N, where the run's H and
        TV were checked against the neighbours' distance (``PROOF.md`` §4). Beyond it (a
        3-category Dirichlet on 10^13 records, a candidate that is the posterior of 10^13
        public records) a run's score moved 2 to 20 times its certified sensitivity.
        Public quantities only: the refusal depends on no data set.
        """
        if fam not in ("bernoulli", "categorical"):
            return
        size = self._size(data)
        if size is None:
            self.reject(
                s,
                f"a {_CONJUGATE[fam]} posterior on data of a size unknown when checking: its "
                "concentration is not bounded",
            )
        prior = self._prior_concentration(prior_t)
        if prior + size > MAX_POSTERIOR:
            self.reject(
                s,
                f"a {_CONJUGATE[fam]} posterior of total concentration up to "
                f"{float(prior):.10g} + {size:,} records exceeds {MAX_POSTERIOR:.10g} "
                f"(MAX_CONCENTRATION + MAX_LEMMA_N), beyond which its divergences were not "
                "checked (PROOF.md §4)",
            )

    def _changed_records(self, data: Bound, fam: str) -> tuple[int, int, float] | None:
        """(records observed, how many may differ, how far their sum may move)."""
        if data.kind == "db":
            assert data.db is not None
            return int(data.db["n"]), 1, record_bound(data.db)
        if data.shape is None:
            return None
        n = math.prod(data.shape)
        l1 = data.get("L1")
        k = n if data.coords is None else sum(1 for c in data.coords if c > 0)
        if math.isfinite(l1) and fam != "normal":
            # integer-valued data (_check_domain) move by >= 1 where they move
            k = min(k, math.ceil(l1 - 1e-12))
        return n, k, l1

    def _posterior(
        self, t: Term, prior_t: Term, lik: Term, data_t: Term, rule: str
    ) -> tuple[Bound, Step]:
        data, idata = self.visit(data_t)
        prior, ip = self.visit(prior_t)
        params = [self.visit(a) for a in lik.args[1:]]
        fam = t.info["family"]
        s = self.step(rule, f"{t.op}([{idata}], prior [{ip}], likelihood {fam})")
        extra: dict[str, Any] = {
            "family": prior.family,
            "param_shape": prior.param_shape,
            "shape": draw_shape(prior.family, prior.param_shape),
        }
        if prior.family is not None and prior.family != _CONJUGATE[fam]:
            raise TypeError(
                f"a {fam} likelihood needs a {_CONJUGATE[fam]} prior, got {prior.family}"
            )
        unbounded = {"eps": INF, "delta": 0.0}
        if not prior.equal:
            return self.fail(
                s,
                "monad",
                "the prior depends on private data: no observe bound" + _why(prior),
                metrics=unbounded,
                **extra,
            ), s
        if not all(b.equal for b, _ in params):
            return self.fail(
                s,
                "monad",
                "the likelihood's parameters depend on private data",
                metrics=unbounded,
                **extra,
            ), s
        self._check_domain(data, idata, fam, prior, s)
        changed = self._changed_records(data, fam)
        if data.equal:
            self._check_concentration(s, prior_t, data, fam)
            s.note = "equal observations and equal priors give equal posteriors"
            return public_bound("monad", **extra), s
        if changed is None:
            return self.fail(
                s,
                "monad",
                "observations differ by an unknown amount" + _why(data),
                metrics=unbounded,
                **extra,
            ), s
        n, k, shift = changed
        if n == 0:  # no observations: both runs' posteriors are the (public) prior
            self._check_concentration(s, prior_t, data, fam)
            s.note = "no observations: the posterior is the prior in both runs"
            return public_bound("monad", **extra), s
        info = self._prior_info(prior_t)
        if info is None:
            return self.fail(
                s,
                "monad",
                "the prior must be a distribution known when checking, or its posterior on "
                "public data of known size",
                metrics=unbounded,
                **extra,
            ), s
        bounds = self._lemma(s, info, lik, fam, n, k, shift, data)
        self._check_concentration(s, prior_t, data, fam)  # after the Beta lemma's cap on n
        if bounds is None:
            return self.fail(
                s,
                "monad",
                f"no observe lemma for this prior and a {fam} likelihood",
                metrics=unbounded,
                **extra,
            ), s
        m = {key: bounds[key] for key in _FDIV}
        m.update(eps=INF, delta=0.0, L1=bounds["l1"], L2=bounds["l2"])
        if math.isinf(max(bounds["coords"])):
            blame = self.fail(s, "monad", bounds["note"]).blame
        else:
            s.note, blame = bounds["note"], s
        extra["param_shape"] = (len(bounds["coords"]),)
        return Bound("monad", metrics=m, coords=tuple(bounds["coords"]), blame=blame, **extra), s

    def _lemma(
        self,
        s: Step,
        info: PriorInfo,
        lik: Term,
        fam: str,
        n: int,
        k: int,
        shift: float,
        data: Bound,
    ) -> dict[str, Any] | None:
        total = n + info.extra
        base = info.base
        if isinstance(base, Beta | Dirichlet) and fam in ("bernoulli", "categorical"):
            self._check_counts_exact(s, base, total)
        if isinstance(base, Beta) and fam == "bernoulli":
            return lemmas.several_records(lemmas.beta_bernoulli_bounds(base.a, base.b, total), k)
        if isinstance(base, Dirichlet) and fam == "categorical":
            one = lemmas.dirichlet_categorical_bounds(base.alpha, total)
            return lemmas.several_records(one, k)
        if isinstance(base, Normal) and fam == "normal":
            kv = self._known_variance(lik)
            if kv is None:
                return None
            v0 = float(base.sd) ** 2 if info.var is None else info.var
            return lemmas.normal_mean_bounds(v0, kv, n, None if math.isinf(shift) else shift)
        return None

    def _check_counts_exact(self, s: Step, base: Beta | Dirichlet, total: int) -> None:
        """Refuse a prior whose parameter plus the records' counts can reach 2^53.

        The run adds counts to the prior's parameters in doubles; from 2^53 on a count of
        one moves a parameter by 0 or 2 (by 1024 at 2^62), not by the lemmas' 1, so
        neighbouring posteriors can differ by far more than certified (PROOF.md A4).
        """
        params = [base.a, base.b] if isinstance(base, Beta) else base.alpha.tolist()
        top = max(params)
        if Fraction(top) + total >= _EXACT_COUNTS:
            self.reject(
                s,
                f"the prior {base!r} has a parameter {top:g} that reaches 2^53 with the "
                f"{total} records' counts: its posterior parameters are not exact in doubles",
            )

    def rule_learn(self, t: Term) -> tuple[Bound, Step]:
        db_t, prior_t, _, lik = t.args
        rule = "Learn (Observe Lemma 6.1-6.3 + adjacency + DPI)"
        return self._posterior(t, prior_t, lik, db_t, rule)

    def rule_observe(self, t: Term) -> tuple[Bound, Step]:
        prior_t, _, lik, datum_t = t.args
        return self._posterior(t, prior_t, lik, datum_t, "Observe (Lemma 6.1-6.3)")
