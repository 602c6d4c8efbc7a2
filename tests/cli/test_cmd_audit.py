"""``dpbayes audit`` through the real command line (``dpbayes.cli.main``): the verdict when
the exact eps exceeds the claim, inputs the audit cannot serve, and arguments out of range.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import pytest

from dpbayes.cli import cmd_audit, main
from dpbayes.programs import examples as ex


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["audit", "-q", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("dpbayes: error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err


# ------------------------------------------------------- the exact eps decides the verdict

LOCAL_DIE = (
    "--model", "dirichlet-categorical", "--prior", "10", "--n", "100", "--mechanism",
    "expmech", "--sensitivity", "local", "--epsilon", "1", "--allow-non-private",
    "--samples", "500", "--max-pairs", "4",
)  # fmt: skip


def test_an_exact_eps_above_the_claim_is_a_fail_with_exit_code_1(capsys) -> None:
    # 500 samples give a lower bound far below the claim; the exact eps 1.43 exceeds it
    code, out, _ = run(capsys, *LOCAL_DIE)
    first = out.splitlines()[0]
    assert code == 1 and first.startswith("FAIL:"), out
    assert (
        "exact eps over the pairs searched 1.43 (pair counts [100, 0, 0] vs [99, 1, 0]) "
        "exceeds the claim eps=1" in first
    )
    assert "the exact eps exceeds the claim" in out
    code, out, _ = run(capsys, *LOCAL_DIE, "--json")
    d = json.loads(out)
    assert code == 1 and d["passed"] is False and d["exact_exceeds_claim"] is True
    assert d["epsilon_lower_bound"] < 1.0 < d["exact_epsilon"]  # the bound is kept as it is


def test_a_private_mechanism_at_a_large_epsilon_passes_with_its_exact_eps(capsys) -> None:
    # the exact eps was 'inf' (underflow) and is 1500 (log space): within the claim 3000
    code, out, _ = run(
        capsys, "--model", "beta-bernoulli", "--mechanism", "expmech", "--sensitivity",
        "global", "--epsilon", "3000", "--n", "50", "--samples", "200", "--json",
    )  # fmt: skip
    d = json.loads(out)
    assert code == 0 and d["passed"] is True
    assert d["exact_epsilon"] == pytest.approx(1500.0, rel=1e-9)
    assert d["details"]["exact_epsilon_all_pairs"] == pytest.approx(1500.0, rel=1e-9)


# ------------------------------------------------------- inputs the audit cannot serve


def _refuse_large_n(monkeypatch, name: str, most: int) -> list[int]:
    """Replace the example ``name`` by one that records its n and refuses n > ``most`` (the
    real one would enumerate or allocate for minutes)."""
    real = ex.EXAMPLES[name]
    calls: list[int] = []

    @functools.wraps(real)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["n"])
        if kwargs["n"] > most:
            raise AssertionError(f"the example was built at n={kwargs['n']}")
        return real(*args, **kwargs)

    monkeypatch.setitem(ex.EXAMPLES, name, guarded)
    return calls


def test_hellinger_dirichlet_caps_n_by_its_enumeration_limit(capsys, monkeypatch) -> None:
    calls = _refuse_large_n(monkeypatch, "hellinger-dirichlet", 99)
    for n in ("1000", "100"):
        code, out, err = run(
            capsys, "--example", "hellinger-dirichlet", "--n", n, "--samples", "100"
        )
        one_line_error(
            code, out, err, "--n must be at most 99", "hellinger-dirichlet", f"got {int(n):,}"
        )
    assert calls == []
    code, out, _ = run(capsys, "--example", "hellinger-dirichlet", "--n", "3", "--samples", "20")
    assert code == 0 and out.startswith("PASS:") and calls == [3]
    # 99 is the largest n whose (n + 1)^3 tuples are within the stated limit
    assert (99 + 1) ** 3 <= cmd_audit.MAX_EXAMPLE_TUPLES == 1_000_000 < (100 + 1) ** 3


def test_hellinger_beta_caps_n_by_its_candidate_limit(capsys, monkeypatch) -> None:
    """n + 1 candidate posteriors: at n = 10^7 the example took 3 GB and 40 s (2 * 10^6 is
    within the pairs' record limit, so this limit is the one that refuses it)."""
    calls = _refuse_large_n(monkeypatch, "hellinger-beta", 999_999)
    code, out, err = run(capsys, "--example", "hellinger-beta", "--n", "2000000")
    one_line_error(code, out, err, "--n must be at most 999,999", "hellinger-beta")
    assert calls == []


def _no_full_pair_list(monkeypatch) -> None:
    """``bool_pairs(n)`` builds all n pairs (16 n^2 bytes): the audit must not call it."""

    def refuse(n: int) -> list[Any]:
        raise AssertionError(f"all {n} neighbouring pairs were built")

    monkeypatch.setattr(ex, "bool_pairs", refuse)


def test_input_beta_builds_only_max_pairs_pairs(capsys, monkeypatch) -> None:
    _no_full_pair_list(monkeypatch)
    code, out, _ = run(
        capsys, "--example", "input-beta", "--n", "300", "--max-pairs", "2", "--samples", "20",
        "--json",
    )  # fmt: skip
    d = json.loads(out)
    assert code == 0 and d["pairs_searched"] == 2
    assert {m["pair"] for m in d["measured"]} <= {"k=0 vs k=1", "k=1 vs k=2"}


@pytest.mark.parametrize("name", ["hellinger-beta", "input-beta", "params-beta"])
def test_the_lazy_pairs_are_the_examples_own(name: str) -> None:
    assert name in cmd_audit._BOOL_PAIR_EXAMPLES
    for n, limit in ((1, 3), (5, 2), (6, 6), (4, 10)):
        mine = list(cmd_audit._bool_pairs(n, limit))
        theirs = ex.EXAMPLES[name](n=n).pairs()[:limit]
        assert len(mine) == len(theirs) == min(n, limit)
        for (x, y, label), (x2, y2, label2) in zip(mine, theirs, strict=True):
            assert np.array_equal(x, x2) and np.array_equal(y, y2) and label == label2


def test_input_beta_refuses_pairs_it_cannot_hold(capsys, monkeypatch) -> None:
    _no_full_pair_list(monkeypatch)
    for n, max_pairs, most in (("10000000", "10", "5,000,000"), ("100000", "100000", "500")):
        code, out, err = run(capsys, "--example", "input-beta", "--n", n, "--max-pairs", max_pairs)
        one_line_error(code, out, err, f"--n must be at most {most} for --example input-beta")
        assert f"--max-pairs {max_pairs}" in err
    # the stated limit: --max-pairs pairs of 2 n records, 10 * 2 * 5,000,000 = 10^8
    assert cmd_audit.MAX_PAIR_RECORDS == 100_000_000


# ------------------------------------------------------- arguments out of range


@pytest.mark.parametrize("value", ["0", "-2"])
def test_max_pairs_below_one_is_refused(capsys, value: str) -> None:
    for target in (
        ("--model", "beta-bernoulli", "--mechanism", "laplace"),
        ("--model", "normal-mean", "--mechanism", "laplace"),
        ("--example", "params-beta"),
    ):
        code, out, err = run(capsys, *target, "--n", "4", "--samples", "20", "--max-pairs", value)
        one_line_error(code, out, err, f"--max-pairs must be >= 1, got {value}")
    code, out, err = run(
        capsys, "--model", "beta-bernoulli", "--mechanism", "laplace", "--keep-pairs", value
    )
    one_line_error(code, out, err, f"--keep-pairs must be >= 1, got {value}")


# ------------------------------------------------------- review: arguments named, capped


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--example", "input-normal", "--delta", "1e-9", "--samples", "100"), "--delta"),
        (("--example", "input-beta", "--seed", "-1", "--samples", "100"), "--seed"),
        (("--example", "input-beta", "--epsilon", "1e-320"), "--epsilon"),
        (
            ("--model", "dirichlet-categorical", "--mechanism", "laplace", "--categories",
             "100000000"),
            "--categories",
        ),
        (("--model", "beta-bernoulli", "--mechanism", "laplace", "--samples", "100000000"),
         "--samples"),
        (
            ("--model", "dirichlet-categorical", "--mechanism", "laplace", "--categories",
             "1000", "--samples", "100000"),
            "--samples times --categories",
        ),
    ],
)  # fmt: skip
def test_audit_arguments_are_refused_in_one_line_naming_them(capsys, args, needle) -> None:
    one_line_error(*run(capsys, *args), needle)
