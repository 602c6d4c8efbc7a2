"""An accountant is a privacy filter: an analyst chooses each spend after seeing the earlier
outputs. Checked exactly on small adaptive strategies of randomized-response releases
(pure eps-DP; RR(eps) is the dominating pair of every eps-DP mechanism), whose transcript
distributions are finite: the delta at the budget's eps of everything the accountant let
through is computed by enumeration.

The "natural" PLD filter (stop when the optimal composition of the path's guarantees would
exceed the budget) is not valid for such spends: a depth-3 strategy passes its check on
every path and yet its transcript is (0.5, 0.1146)-DP at best, not (0.5, 0.1). So a "pld"
ledger takes Gaussian spends only, and "basic" and "rdp" ledgers keep every such strategy
within the budget.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pytest

from dpbayes.privacy import Accountant
from dpbayes.privacy.accountant import BudgetExceeded
from dpbayes.privacy.composition import Event, compose

# A strategy: None (stop) or (eps, after output 0, after output 1).
Tree = tuple[float, "Tree", "Tree"] | None


def _rr(eps: float, out: int) -> tuple[float, float]:
    """P(out | x = 1), P(out | x = 0) of randomized response at eps."""
    p = math.exp(eps) / (1 + math.exp(eps))
    return (p, 1 - p) if out == 1 else (1 - p, p)


def _leaves(
    tree: Tree, p: float = 1.0, q: float = 1.0, path: tuple[float, ...] = ()
) -> Iterator[tuple[tuple[float, ...], float, float]]:
    if tree is None:
        yield path, p, q
        return
    eps, after0, after1 = tree
    for out, child in ((0, after0), (1, after1)):
        a, b = _rr(eps, out)
        yield from _leaves(child, p * a, q * b, (*path, eps))


def _delta_true(tree: Tree, eps: float) -> float:
    """The transcript's delta at eps (both directions; exact)."""
    leaves = list(_leaves(tree))
    return max(
        math.fsum(max(0.0, p - math.exp(eps) * q) for _, p, q in leaves),
        math.fsum(max(0.0, q - math.exp(eps) * p) for _, p, q in leaves),
    )


def _delta_fixed(path: tuple[float, ...], eps: float) -> float:
    """The optimal composition of the path's guarantees, as if fixed in advance (exact)."""
    total = 0.0
    for outs in itertools.product((0, 1), repeat=len(path)):
        p = q = 1.0
        for e, o in zip(path, outs, strict=True):
            a, b = _rr(e, o)
            p, q = p * a, q * b
        total += max(0.0, p - math.exp(eps) * q)
    return total


def _chain(epss: list[float]) -> Tree:
    """Run ``epss`` in turn while the output is 1 (the loss rising); stop at a 0."""
    return None if not epss else (epss[0], None, _chain(epss[1:]))


S = None
# Found by an exact search over adaptive trees (depth 2 never violates).
T1: Tree = (0.15, (0.4, S, (0.4, S, S)), (0.65, S, S))
T3: Tree = (0.1, _chain([0.2, 0.2, 0.2, 0.3, 0.3]), _chain([0.2, 0.3, 0.3, 0.3]))
CASES = [(T1, 0.5, 0.1), (T3, 1.0, 0.01)]


@pytest.mark.parametrize(("tree", "eps", "delta"), CASES)
def test_the_natural_pld_check_passes_every_path_of_a_strategy_beyond_its_budget(
    tree: Tree, eps: float, delta: float
) -> None:
    for path, _, _ in _leaves(tree):
        assert _delta_fixed(path, eps) <= delta
        # dpbayes's PLD composition of the path (pessimistic) agrees: it fits too
        assert compose([Event(e, 0.0) for e in path], "pld", delta)[0] <= eps
    assert _delta_true(tree, eps) > 1.1 * delta  # 0.1146 against 0.1; 0.0124 against 0.01


def _run(tree: Tree, make: object) -> Tree:
    """The strategy as the accountant lets it run: at each node the analyst asks for the
    spend on a ledger holding the path so far, and stops where it is refused."""

    def walk(node: Tree, path: tuple[float, ...]) -> Tree:
        if node is None:
            return None
        acc = make()  # type: ignore[operator]
        for e in path:
            acc.spend(e)
        try:
            acc.spend(node[0])
        except (BudgetExceeded, ValueError):
            return None
        path = (*path, node[0])
        return (node[0], walk(node[1], path), walk(node[2], path))

    return walk(tree, ())


@pytest.mark.parametrize(("tree", "eps", "delta"), CASES)
@pytest.mark.parametrize("composition", ["basic", "rdp", "pld"])
def test_every_ledger_keeps_the_adaptive_strategy_within_its_budget(
    tree: Tree, eps: float, delta: float, composition: str
) -> None:
    ran = _run(tree, lambda: Accountant(eps, delta, composition=composition))
    assert _delta_true(ran, eps) <= delta
    if composition == "pld":
        assert ran is None  # pure spends: refused, nothing released


def test_an_rdp_ledger_lets_a_long_adaptive_strategy_run_and_stays_within_budget() -> None:
    """The filter is not vacuous: on a budget of (2, 1e-3) an rdp ledger runs a chain of
    RR releases deep into T4-like strategies, and their exact delta is within the budget."""
    tree = (0.1, _chain([0.2] * 5 + [0.3] * 4), _chain([0.2] * 3 + [0.3] * 5))
    ran = _run(tree, lambda: Accountant(2.0, 1e-3, composition="rdp"))
    depth = max(len(path) for path, _, _ in _leaves(ran))
    assert depth >= 8
    assert _delta_true(ran, 2.0) <= 1e-3
