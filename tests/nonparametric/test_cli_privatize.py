"""``dpbayes privatize`` end to end, through a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
from scipy import stats

ALPHA = 1e-4


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def test_privatize_laplace_column(tmp_path):
    n = 4000
    frame = pd.DataFrame(
        {"id": np.arange(n), "income": np.r_[np.full(n // 2, 50.0), np.full(n // 2, -1.0)]}
    )
    frame.to_csv(tmp_path / "in.csv", index=False)
    res = run_cli(
        "privatize",
        "--data",
        "in.csv",
        "--column",
        "income",
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--r",
        "3",
        "--out",
        "out.csv",
        "--seed",
        "5",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "1-DP" in res.stdout and "SIMULATION" in res.stdout
    out = pd.read_csv(tmp_path / "out.csv")
    assert list(out.columns) == ["income"] and len(out) == n  # the other columns are not released
    z = out["income"].to_numpy()
    # first half clipped to 3, second half kept at -1; Laplace scale 2r/eps = 6
    for part, centre in ((z[: n // 2], 3.0), (z[n // 2 :], -1.0)):
        assert stats.kstest(part, stats.laplace(centre, 6.0).cdf).pvalue > ALPHA
    g = json.loads((tmp_path / "out.guarantee.json").read_text())
    assert g["epsilon"] == 1.0 and g["sensitivity"] == 6.0 and g["details"]["r"] == 3.0
    assert g["simulation"] is True


def test_privatize_bad_arguments_exit_2_in_process(tmp_path, capsys, monkeypatch):
    from dpbayes.cli import main

    pd.DataFrame({"x": [1.0, 2.0], "y": [1.0, None]}).to_csv(tmp_path / "in.csv", index=False)
    monkeypatch.chdir(tmp_path)
    base = ["privatize", "--data", "in.csv", "--out", "out.csv", "--epsilon", "1"]
    for extra, needle in (
        (["--column", "y", "--r", "1"], "missing values"),
        (["--column", "nope", "--r", "1"], "nope"),
        (["--column", "x", "--r", "0"], "r must be > 0"),
        (["--column", "x"], "r (the clipping bound)"),
        (["--column", "x", "--mechanism", "randomized-response"], "--categories"),
    ):
        assert main(base + extra) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "out.csv").exists()
