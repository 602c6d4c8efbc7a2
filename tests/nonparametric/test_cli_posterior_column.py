"""``dpbayes posterior --privatized``: the analyst's side of ``dpbayes privatize``."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from dpbayes.nonparametric import (
    ConvergenceWarning,
    DPMixture,
    LocalGaussian,
    LocalLaplace,
    mechanism_of,
    read_privatized,
)


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", *args], capture_output=True, text=True, cwd=cwd
    )


@pytest.fixture(scope="module")
def privatized(tmp_path_factory):
    """A column privatised by the CLI (Laplace, eps 2, r 1; seeded simulation noise)."""
    d = tmp_path_factory.mktemp("column")
    g = np.random.default_rng(0)
    x = np.where(g.random(600) < 0.3, -0.5, 0.4) + g.normal(0, 0.1, 600)
    pd.DataFrame({"income": x}).to_csv(d / "people.csv", index=False)
    res = run_cli(
        "privatize", "--data", "people.csv", "--column", "income", "--epsilon", "2",
        "--r", "1", "--out", "z.csv", "--seed", "3", cwd=d,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return d


def test_the_posterior_is_the_dp_mixture_with_the_mechanism_the_guarantee_names(privatized):
    """Same seed, same draws: the CLI's fit is DPMixture(LocalLaplace(eps 2, r 1)) on the
    column, so a mechanism rebuilt with another scale would give other numbers."""
    res = run_cli(
        "posterior", "--privatized", "z.csv", "--draws", "60", "--chains", "2", "--seed", "9",
        "--json", "-q", cwd=privatized,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["n"] == 600 and out["guarantee"]["simulation"] is True
    assert "SEEDED SIMULATION" in res.stderr  # said, not hidden
    z = pd.read_csv(privatized / "z.csv")["income"].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = DPMixture(mechanism=LocalLaplace(epsilon=2.0, r=1.0)).fit(
            z, draws=60, chains=2, rng=9, progress=False
        )
    assert out["functionals"]["mean"]["mean"] == pytest.approx(fit.mean(), rel=1e-12)
    grid = np.array(out["cdf_bands"]["grid"])
    np.testing.assert_array_equal(grid, np.linspace(-1, 1, 21))
    np.testing.assert_allclose(out["cdf_bands"]["cdf"], fit.cdf(grid), rtol=1e-12)
    lo, hi = fit.cdf_band(grid, 0.95, kind="simultaneous")
    np.testing.assert_allclose(out["cdf_bands"]["credible_simultaneous"], [lo, hi])


def test_negative_numbers_in_scientific_notation_are_values_not_options(privatized):
    """argparse took ``-1e0`` for an unknown option ("--grid: expected 3 arguments")."""
    res = run_cli(
        "posterior", "--privatized", "z.csv", "--draws", "60", "--chains", "2", "--seed", "9",
        "--grid", "-1e0", "1", "5", "--json", "-q", cwd=privatized,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["cdf_bands"]["grid"] == [-1.0, -0.5, 0.0, 0.5, 1.0]


def test_text_report_with_calibrated_bands_and_a_figure(privatized):
    res = run_cli(
        "posterior", "--privatized", "z.csv", "--draws", "40", "--chains", "2", "--seed", "1",
        "--calibrate", "3", "--grid", "-0.8", "0.8", "5", "--out", "fig.png", "-q",
        cwd=privatized,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "posterior of the distribution of the true values" in res.stdout
    assert "calibrated [" in res.stdout and "3 refits" in res.stdout
    assert "F(-0.8)" in res.stdout and "F(0.8)" in res.stdout
    assert (privatized / "fig.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--privatized", "nope.csv"], "--privatized nope.csv: no such file"),
        (["--privatized", "."], "--privatized .: is a folder"),
        (["--privatized", "z.csv", "--guarantee", "g.json"], "--guarantee g.json: no such file"),
        (["--privatized", "z.csv", "--column", "age"], "--column 'age' is not in z.csv"),
        (["--privatized", "z.csv", "--n", "5"], "--n is for --release, not --privatized"),
        (["--privatized", "z.csv", "--iterations", "50"], "use --draws"),
        (["--privatized", "z.csv", "--draws", "3"], "--draws"),
        (["--privatized", "z.csv", "--grid", "1", "0", "5"], "--grid: LO must be below HI"),
        (["--privatized", "z.csv", "--out", "z.csv"], "--out"),
        (["--privatized", "z.csv", "--out", "fig.xyz"], "no figure format"),
        (["--privatized", "z.csv", "--out", "fig.pgf"], "no figure format 'pgf'"),
        (["--privatized", "z.csv", "--json", "z.guarantee.json"], "--guarantee"),
        (["--privatized", "z.csv", "--grid", "0", "1", "inf"], "--grid POINTS"),
        (["--privatized", "z.csv", "--grid", "0", "1", "nan"], "--grid POINTS"),
        (["--privatized", "z.csv", "--grid", "-inf", "1", "5"], "--grid LO"),
        (["--privatized", "z.csv", "--grid", "0", "1", "-5e0"], "--grid POINTS"),
        (["--privatized", "z.csv", "--chains", "100000000000000"], "--chains must be at most"),
        (["--privatized", "z.csv", "--draws", "10" + "0" * 22], "--draws must be at most"),
        (["--privatized", "z.csv", "--calibrate", "10" + "0" * 16], "--calibrate must be at"),
        (["--privatized", "z.csv", "--seed", "-1"], "--seed"),
        (["--release", "r.json", "--column", "x"], "--column is for --privatized"),
        (["--release", "r.json", "--privatized", "z.csv"], "not allowed with argument"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_naming_the_flag(privatized, args, message):
    before = (privatized / "z.csv").read_bytes()
    res = run_cli("posterior", *args, cwd=privatized)
    assert res.returncode == 2, res.stdout
    assert message in res.stderr.strip().splitlines()[-1]  # one line (after argparse's usage)
    assert res.stderr.startswith(("dpbayes: error: ", "usage: "))
    assert (privatized / "z.csv").read_bytes() == before  # nothing written over the data


def test_a_guarantee_edited_or_of_categories_is_refused(privatized, tmp_path):
    g = json.loads((privatized / "z.guarantee.json").read_text())
    g["details"]["scale"] = 0.1  # less noise than eps 2, r 1 give: would over-trust the data
    (tmp_path / "z.csv").write_bytes((privatized / "z.csv").read_bytes())
    (tmp_path / "z.guarantee.json").write_text(json.dumps(g))
    res = run_cli("posterior", "--privatized", "z.csv", cwd=tmp_path)
    assert res.returncode == 2 and "does not follow from its epsilon" in res.stderr
    pd.DataFrame({"h": ["a", "b", "a"]}).to_csv(tmp_path / "h.csv", index=False)
    res = run_cli(
        "privatize", "--data", "h.csv", "--column", "h", "--mechanism", "randomized-response",
        "--categories", "a", "b", "--epsilon", "1", "--out", "hz.csv", "--seed", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = run_cli("posterior", "--privatized", "hz.csv", cwd=tmp_path)
    assert res.returncode == 2 and "randomized response releases categories" in res.stderr


def test_mechanism_of_rebuilds_both_local_mechanisms_from_their_guarantees():
    for mech in (
        LocalLaplace(epsilon=0.7, r=3.0),
        LocalGaussian(epsilon=0.5, delta=1e-6, r=2.0),
        LocalGaussian(epsilon=0.5, delta=1e-6, r=2.0, calibration="classic"),
    ):
        for simulation in (False, True):
            assert mechanism_of(mech.guarantee(simulation=simulation)) == mech


def test_read_privatized_reads_parquet_and_names_the_column_it_needs(tmp_path):
    mech = LocalLaplace(epsilon=1.0, r=2.0)
    col = mech.privatize(np.linspace(-1, 1, 50), rng=0)
    pd.DataFrame({"a": col.values, "b": col.values}).to_parquet(tmp_path / "z.parquet")
    (tmp_path / "z.guarantee.json").write_text(json.dumps(col.guarantee.to_dict()))
    with pytest.raises(ValueError, match=r"column: z.parquet has 2 columns"):
        read_privatized(tmp_path / "z.parquet")
    got = read_privatized(tmp_path / "z.parquet", column="b")
    np.testing.assert_array_equal(got.values, col.values)
    assert got.mechanism == mech and got.guarantee == col.guarantee
    pd.DataFrame({"a": [1.0, None]}).to_csv(tmp_path / "m.csv", index=False)
    with pytest.raises(ValueError, match="missing or infinite"):
        read_privatized(tmp_path / "m.csv", guarantee=tmp_path / "z.guarantee.json")


def test_a_figure_without_a_suffix_is_written_where_it_is_said(privatized):
    res = run_cli(
        "posterior", "--privatized", "z.csv", "--draws", "20", "--chains", "1", "--out",
        "figure", "-q", cwd=privatized,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "figure:      figure" in res.stdout
    assert (privatized / "figure").read_bytes()[:4] == b"\x89PNG"
    assert not (privatized / "figure.png").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "a JSON list, not an object"),
        ('"laplace"', "a JSON str, not an object"),
        ("[" * 100_000 + "]" * 100_000, "not a guarantee file"),
        ("MECHANISM_NULL", "its mechanism must be a name"),
        ("SIMULATION_TEXT", "simulation true or false"),
        ("R_HUGE", "guarantee"),
    ],
)
def test_malformed_guarantee_files_are_refused_naming_the_file(tmp_path, text, message):
    col = LocalLaplace(epsilon=1.0, r=2.0).privatize(np.linspace(-1, 1, 20), rng=0)
    pd.DataFrame({"z": col.values}).to_csv(tmp_path / "z.csv", index=False)
    g = col.guarantee.to_dict()
    if text == "MECHANISM_NULL":
        text = json.dumps({**g, "mechanism": None})
    elif text == "SIMULATION_TEXT":
        text = json.dumps({**g, "simulation": "false"})
    elif text == "R_HUGE":
        text = json.dumps(g).replace('"r": 2.0', '"r": 1' + "0" * 400)
    (tmp_path / "z.guarantee.json").write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_privatized(tmp_path / "z.csv")
    assert "z.guarantee.json" in str(info.value)


def test_columns_that_are_not_numbers_or_have_no_header_are_refused(tmp_path):
    col = LocalLaplace(epsilon=1.0, r=2.0).privatize(np.linspace(-1, 1, 20), rng=0)
    side = tmp_path / "g.json"
    side.write_text(json.dumps(col.guarantee.to_dict()))
    pd.DataFrame({"z": pd.array([True, None, False], dtype="boolean")}).to_parquet(
        tmp_path / "b.parquet"
    )
    with pytest.raises(ValueError, match="is not numeric"):
        read_privatized(tmp_path / "b.parquet", guarantee=side)
    (tmp_path / "h.csv").write_text("0.5\n1.5\n")
    with pytest.raises(ValueError, match="first line is a number"):
        read_privatized(tmp_path / "h.csv", guarantee=side)
    (tmp_path / "p.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="not a CSV or Parquet file"):
        read_privatized(tmp_path / "p.parquet", guarantee=side)
