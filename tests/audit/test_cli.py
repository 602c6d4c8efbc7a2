"""``dpbayes audit`` end to end, through a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

ARGS = [sys.executable, "-m", "dpbayes.cli", "audit"]


def run(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARGS, *extra], capture_output=True, text=True, timeout=300)


def parse(*extra: str):
    """The ``audit`` sub-command alone, in-process (the subprocess test covers the rest)."""
    import argparse

    from dpbayes.cli import cmd_audit

    parser = argparse.ArgumentParser(prog="dpbayes")
    cmd_audit.register(parser.add_subparsers())
    return parser.parse_args(["audit", *extra])


def test_audit_local_sensitivity_expmech_json():
    p = run(
        "--model",
        "beta-bernoulli",
        "--n",
        "10",
        "--mechanism",
        "expmech",
        "--sensitivity",
        "local",
        "--epsilon",
        "1",
        "--allow-non-private",
        "--json",
        "--samples",
        "600",
        "--max-pairs",
        "3",
    )
    assert p.returncode in (0, 1), p.stderr
    d = json.loads(p.stdout)
    for key in (
        "claimed_epsilon",
        "epsilon_lower_bound",
        "confidence",
        "samples",
        "worst_pair",
        "passed",
    ):
        assert key in d
    assert d["claimed_epsilon"] == 1.0 and d["samples"] == 600
    assert d["details"]["private"] is False
    # exact eps of this mechanism at n=10 is 0.633 < 1 (over every pair k vs k + 1 too): the
    # audit cannot (and must not) fail it; the violation is in test_exact.py (the die)
    assert d["exact_epsilon"] == pytest.approx(0.6328, abs=1e-3)
    assert d["details"]["exact_epsilon_all_pairs"] == pytest.approx(0.6328, abs=1e-3)
    assert d["epsilon_lower_bound"] <= d["exact_epsilon"]
    assert d["passed"] is True and p.returncode == 0


def test_audit_refuses_local_sensitivity_without_the_flag():
    args = parse(
        "--model",
        "beta-bernoulli",
        "--mechanism",
        "expmech",
        "--sensitivity",
        "local",
        "--samples",
        "100",
    )
    with pytest.raises(ValueError, match="allow_non_private"):
        args.handler(args)


def test_audit_of_a_paper_example_prints_a_verdict(capsys):
    args = parse("--example", "params-normal", "--n", "4", "--samples", "600")
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith("PASS:")


def test_audit_prior_option():
    args = parse("--model", "beta-bernoulli", "--prior", "1", "--mechanism", "laplace")
    with pytest.raises(ValueError, match="prior must be two numbers"):
        args.handler(args)
    args = parse("--example", "params-beta", "--prior", "1", "2")
    with pytest.raises(ValueError, match="--prior is for --model"):
        args.handler(args)


def test_audit_needs_a_target():
    args = parse("--n", "3")
    with pytest.raises(ValueError, match="--model"):
        args.handler(args)


def test_audit_reports_a_violation_with_exit_code_1(capsys, monkeypatch):
    # a release mechanism whose claim is wrong: the audit fails it and exits 1
    from dpbayes.audit import targets

    real = targets.release_mechanism

    def lying(model, mechanism, *, epsilon, **kw):  # claims eps, runs at 4 eps
        inner = real(model, mechanism, epsilon=4 * epsilon, **kw)
        inner.plan_for = real(model, mechanism, epsilon=epsilon, **kw).plan_for
        return inner

    monkeypatch.setattr(targets, "release_mechanism", lying)
    args = parse(
        "--model",
        "beta-bernoulli",
        "--mechanism",
        "laplace",
        "--n",
        "4",
        "--epsilon",
        "0.5",
        "--samples",
        "2000",
        "--max-pairs",
        "2",
    )
    code = args.handler(args)
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("FAIL:")


def test_experiment_is_discovered():
    from dpbayes import experiments

    assert "audit" in experiments.available()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--example", "bernoulli_count", "--divergence", "bogus"], "--divergence is for --model"),
        (["--example", "bernoulli_count", "--mechanism", "laplace"], "--mechanism is for --model"),
        (["--example", "bernoulli_count", "--categories", "4"], "--categories is for --model"),
        (["--model", "beta-bernoulli", "--mechanism", "laplace", "--categories", "5"],
         "--categories is for dirichlet-categorical, not beta-bernoulli"),
    ],
)  # fmt: skip
def test_options_an_audit_would_ignore_are_refused(extra: list[str], message: str) -> None:
    """A review: with --example the model's options (even --divergence bogus) were
    silently ignored, and --categories for beta-bernoulli too."""
    r = run(*extra)
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
