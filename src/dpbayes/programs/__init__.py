"""Private Bayesian programs with privacy certificates (PrivInfer, paper 002).

Write a program with the combinators of :mod:`dpbayes.programs.terms`, certify it with
:meth:`Program.check` (a :class:`Certificate` with a readable derivation, or
:class:`NotPrivate` naming the first offending step), and run it on data with
:meth:`Program.run`. The examples of the paper's §6 are in :mod:`dpbayes.programs.examples`.
"""

from dpbayes.programs.checker import Bound, Certificate, NotPrivate, Step, check
from dpbayes.programs.program import Program, ProgramResult, program
from dpbayes.programs.terms import (
    Term,
    bernoulli,
    beta,
    bind,
    categorical,
    clip,
    const,
    dirichlet,
    eq_score,
    exp_mech,
    gauss_mech,
    get_mean,
    get_params,
    hellinger,
    infer,
    kl,
    lap_mech,
    learn,
    map_records,
    multinomial,
    normal,
    observe,
    private_bools,
    private_categories,
    private_reals,
    ran,
    total_variation,
    unit,
)

__all__ = [
    "Bound",
    "Certificate",
    "NotPrivate",
    "Program",
    "ProgramResult",
    "Step",
    "Term",
    "bernoulli",
    "beta",
    "bind",
    "categorical",
    "check",
    "clip",
    "const",
    "dirichlet",
    "eq_score",
    "exp_mech",
    "gauss_mech",
    "get_mean",
    "get_params",
    "hellinger",
    "infer",
    "kl",
    "lap_mech",
    "learn",
    "map_records",
    "multinomial",
    "normal",
    "observe",
    "private_bools",
    "private_categories",
    "private_reals",
    "program",
    "ran",
    "total_variation",
    "unit",
]
