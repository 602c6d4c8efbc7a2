"""Issue 16 (items 1-5, 7-9) and issue 21 item 5, through the real ``dpbayes`` interface.

Noise-aware results first; every output destination checked before noise is drawn and a
release never lost; inapplicable flags refused in one line naming the argument; release
files checked when read; a price before the purchase (--dry-run); one privacy unit for
the library and the CLI; one exit-code/stream rule; plots that tell the truth.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpbayes.cli import main

NAIVE = "naive posterior (treats the noise as data; over-confident)"


def dpbayes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", *args], capture_output=True, text=True, timeout=300
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def ledger(tmp_path: Path, eps: float = 2.0) -> Path:
    from dpbayes.privacy import Accountant

    path = tmp_path / "team.ledger"
    Accountant(eps, path=path)
    return path


def spent(path: Path) -> float:
    from dpbayes.privacy import Accountant

    return Accountant.open(path).spent[0]


# ---------------------------------------------------------------- 1. noise-aware first


def test_release_text_leads_with_the_noise_aware_posterior() -> None:
    r = dpbayes("release", "--epsilon", "0.05", "--seed", "4")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "noise-aware posterior (accounts for the privacy noise" in out
    assert out.index("noise-aware posterior") < out.index(NAIVE) < out.index("guarantee:")
    # the headline interval is the noise-aware one: wider than the naive one
    lines = [ln for ln in out.splitlines() if "credible interval (central)" in ln]
    (alo, ahi), (nlo, nhi) = (json.loads(ln.split(": ", 1)[1]) for ln in lines[:2])
    assert ahi - alo > 2 * (nhi - nlo)


def test_release_json_and_dirichlet_text_name_the_categories(capsys) -> None:
    code, out, _ = run(
        capsys, "release", "--model", "dirichlet-categorical", "--epsilon", "0.1", "--seed", "2"
    )
    assert code == 0
    assert out.index("P(poor)") < out.index(NAIVE)
    code, out, _ = run(
        capsys, "release", "--model", "normal-mean", "--epsilon", "0.1", "--seed", "2", "--json"
    )
    doc = json.loads(out)
    assert list(doc)[:2] == ["noise_aware_posterior", "naive_posterior"]
    aware, naive = doc["noise_aware_posterior"], doc["naive_posterior"]
    assert aware["interval"]["level"] == 0.95 and len(aware["interval"]["bounds"]) == 2
    assert naive["label"] == "treats the noise as data; over-confident"
    assert aware["sd"] > naive["sd"]


def test_release_repr_and_html_lead_with_the_noise_aware_posterior() -> None:
    import dpbayes as dpb
    from dpbayes.data import bundled_table

    rel = dpb.release(
        dpb.models.BetaBernoulli(alpha=1, beta=1),
        bundled_table("randhie"),
        column="hlthp",
        mechanism="laplace",
        epsilon=0.05,
        rng=3,
    )
    text = repr(rel)
    assert text.startswith("Release(beta-bernoulli, mechanism='laplace')")
    assert text.index("noise-aware posterior") < text.index(NAIVE) < text.index("guarantee")
    lo, hi = rel.noise_aware_posterior().interval(0.95)
    assert f"{lo:.4g}" in text and f"{hi:.4g}" in text
    assert len(text.splitlines()) <= 8
    html = rel._repr_html_()
    assert html.startswith("<div>") and html.index("noise-aware") < html.index("naive")
    assert "&#x27;" in html and len(html) < 2000  # escaped, compact


def test_repr_never_runs_the_slow_noise_aware_paths(monkeypatch) -> None:
    """MCMC and the exponential mechanism's exact sum are not run by a repr; quick ones are."""
    import importlib

    import dpbayes as dpb
    from dpbayes.models.bayes_net import BayesNet

    na = importlib.import_module("dpbayes.release.base")

    df = pd.DataFrame({"a": [0, 1, 1, 0] * 10, "b": [0, 1, 0, 0] * 10})
    bn = BayesNet({"a": [0, 1], "b": [0, 1]}, edges=[("a", "b")])
    coin = dpb.models.BetaBernoulli(alpha=1, beta=1)
    slow = [
        dpb.release(bn, df, mechanism="laplace", epsilon=1.0, rng=1),
        dpb.release(coin, [0, 1] * 20, mechanism="expmech", epsilon=1.0, rng=1),
    ]
    quick = dpb.release(coin, [0, 1] * 20, mechanism="laplace", epsilon=1.0, rng=1)
    calls: list[str] = []
    original = na.noise_aware_posterior

    def counting(rel: Any, **options: Any) -> Any:
        calls.append(rel.mechanism)
        return original(rel, **options)

    monkeypatch.setattr(na, "noise_aware_posterior", counting)
    for rel in slow:
        text = repr(rel) + rel._repr_html_()
        assert "not computed for display" in text and ".noise_aware_posterior()" in text
    assert calls == []
    assert "interval [" in repr(quick).split("naive")[0] and calls == ["laplace"]
    repr(quick)  # computed once and kept
    assert calls == ["laplace"]


def test_the_interval_the_cli_leads_with_covers_the_truth_at_its_nominal_rate(capsys) -> None:
    """Coverage over seeded releases at eps 0.05 on the bundled data (simulation noise).

    The truth is the bundled share of poor health (the data's, which the noise hides).
    100 seeds: the binomial sd at 95% is 0.022, so nominal coverage passes >= 0.885 (3 sd);
    the naive interval (about a third) fails it by far more than that.
    """
    from dpbayes.data import load_bundled

    truth = float(load_bundled("randhie")["hlthp"].mean())
    seeds = range(100)
    aware = naive = 0
    for seed in seeds:
        code, out, _ = run(capsys, "release", "--epsilon", "0.05", "--seed", str(seed), "--json")
        assert code == 0
        doc = json.loads(out)
        lo, hi = doc["noise_aware_posterior"]["interval"]["bounds"]
        nlo, nhi = doc["naive_posterior"]["interval"]["bounds"]
        aware += lo <= truth <= hi
        naive += nlo <= truth <= nhi
    rate, naive_rate = aware / len(seeds), naive / len(seeds)
    print(f"coverage of the 95% interval: noise-aware {rate:.2f}, naive {naive_rate:.2f}")
    assert rate >= 0.95 - 3 * 0.022
    assert naive_rate < 0.95 - 3 * 0.022


def test_progress_shows_on_a_terminal_only() -> None:
    import io

    from dpbayes.cli.common import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    with progress("noise-aware posterior (MCMC)", stream=tty):
        pass
    with progress("noise-aware posterior (MCMC)", stream=pipe):
        pass
    quiet = Tty()
    with progress("x", stream=quiet, quiet=True):
        pass
    assert "noise-aware posterior (MCMC) done in" in tty.getvalue()
    assert pipe.getvalue() == "" and quiet.getvalue() == ""


# ---------------------------------------------------------------- 2. nothing spent, nothing lost


@pytest.mark.parametrize("flag", ["--out", "--plot", "--json"])
def test_a_bad_destination_spends_nothing(tmp_path: Path, flag: str) -> None:
    path = ledger(tmp_path)
    r = dpbayes("release", "--epsilon", "1", "--budget-file", str(path), flag, "/no/such/x.png")
    assert r.returncode == 2 and r.stdout == ""
    assert (
        r.stderr.count("\n") == 1 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    )
    assert spent(path) == 0.0


@pytest.mark.parametrize("clash", ["ledger", "lock", "data", "each-other", "format"])
def test_an_output_that_would_destroy_a_file_or_cannot_be_drawn_spends_nothing(
    tmp_path: Path, capsys, clash: str
) -> None:
    """A review found `--json` onto the ledger erasing every spend (exit 0), `--json` and
    `--out` onto one file, and an unknown figure format found after the charge. Each is
    refused before any noise, in one line naming the flag, with the ledger and the data as
    they were."""
    path = ledger(tmp_path)
    data = tmp_path / "d.csv"
    pd.DataFrame({"x": [0, 1, 1, 0, 1]}).to_csv(data, index=False)
    before = {p: p.read_bytes() for p in (path, data)}
    target = {
        "ledger": ["--json", str(path)],
        "lock": ["--json", f"{path}.lock"],
        "data": ["--json", str(data)],
        "each-other": ["--json", str(tmp_path / "r.png"), "--out", str(tmp_path / "r.png")],
        "format": ["--out", str(tmp_path / "fig.xyz")],
    }[clash]
    code, out, err = run(
        capsys,
        *["release", "--epsilon", "1", "--data", str(data), "--column", "x"],
        *["--budget-file", str(path), *target],
    )
    assert code == 2 and out == "", out
    assert err.count("\n") == 1 and ("--json" in err or "--out" in err), err
    assert "nothing was spent" in err
    assert spent(path) == 0.0
    assert all(p.read_bytes() == b for p, b in before.items())


def test_a_figure_path_without_a_suffix_is_the_file_written(tmp_path: Path, capsys) -> None:
    """A review found `--out book` writing `book.png` (matplotlib appends the suffix), so a
    ledger named `book.png` became a PNG and every spend was lost. The figure is written
    to exactly the path that was checked and reported."""
    data = tmp_path / "d.csv"
    pd.DataFrame({"x": [0, 1, 1, 0, 1]}).to_csv(data, index=False)
    from dpbayes.privacy import Accountant

    book = tmp_path / "book.png"
    Accountant(3.0, path=book)
    before = book.read_bytes()
    out = tmp_path / "book"
    code, _, err = run(
        capsys,
        *["release", "-q", "--epsilon", "1", "--data", str(data), "--column", "x"],
        *["--budget-file", str(book), "--out", str(out)],
    )
    assert code == 0, err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the figure, at the path given
    assert book.read_bytes() != before and spent(book) == 1.0  # the ledger, still a ledger


def test_a_dry_run_never_writes_its_price_over_the_ledger(tmp_path: Path, capsys) -> None:
    path = ledger(tmp_path)
    before = path.read_bytes()
    code, out, err = run(
        capsys, "release", "--epsilon", "1", "--dry-run", "--budget-file", str(path),
        "--json", str(path),
    )  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1 and "--json" in err
    assert path.read_bytes() == before


def test_an_interrupted_noise_aware_posterior_still_prints_the_paid_release(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Ctrl+C (or any error) in the slow noise-aware step comes after the charge: the
    release is printed and recorded all the same, and the exit code says it was cut."""
    from dpbayes.release.base import Release

    def interrupted(self: Any, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Release, "noise_aware_posterior", interrupted)
    path = ledger(tmp_path)
    rec = tmp_path / "rel.json"
    code, out, err = run(
        capsys, "release", "--epsilon", "1", "--budget-file", str(path), "--json", str(rec)
    )
    assert code == 130 and spent(path) == pytest.approx(1.0)
    assert "released:" in out and "unavailable: interrupted" in out
    assert json.loads(rec.read_text())["released"]
    assert err.count("\n") == 1 and "interrupted" in err and "charged" in err

    def broken(self: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("out of something")

    monkeypatch.setattr(Release, "noise_aware_posterior", broken)
    code, out, err = run(capsys, "release", "--epsilon", "0.5", "--budget-file", str(path))
    assert code == 0 and spent(path) == pytest.approx(1.5)
    assert "unavailable: out of something" in out and "released:" in out


def test_a_write_failing_after_the_charge_still_prints_the_release(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    import dpbayes.plots

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(dpbayes.plots, "plot_posteriors", broken)
    path = ledger(tmp_path)
    png = tmp_path / "x.png"
    code, out, err = run(
        capsys, "release", "--epsilon", "1", "--budget-file", str(path), "--out", str(png)
    )
    assert code == 2 and spent(path) == pytest.approx(1.0)
    assert "noise-aware posterior" in out and "released:" in out  # never lost
    assert err.count("\n") == 1 and "--out" in err and "No space left" in err
    # --json FILE that fails after the charge: the record goes to stdout instead
    monkeypatch.setattr(
        "dpbayes.cli.release_run.emit_json",
        lambda obj, dest: (
            (_ for _ in ()).throw(OSError(5, "I/O error"))
            if dest not in (None, "-")
            else print(json.dumps(obj))
        ),
    )
    rec = tmp_path / "rel.json"
    code, out, err = run(
        capsys, "release", "--epsilon", "0.5", "--budget-file", str(path), "--json", str(rec)
    )
    assert code == 2 and spent(path) == pytest.approx(1.5)
    assert json.loads(out)["noise_aware_posterior"]["interval"]["bounds"]
    assert err.count("\n") == 1 and "--json" in err


def test_json_file_is_the_release_file_the_recipient_reads(tmp_path: Path, capsys) -> None:
    rec = tmp_path / "rel.json"
    code, out, _ = run(capsys, "release", "--epsilon", "0.2", "--seed", "1", "--json", str(rec))
    assert code == 0 and f"record:      {rec}" in out
    code, out, _ = run(capsys, "posterior", "--release", str(rec), "--json")
    assert code == 0
    doc = json.loads(out)["noise_aware_posterior"]
    saved = json.loads(rec.read_text())["noise_aware_posterior"]
    assert doc["interval"]["bounds"] == pytest.approx(saved["interval"]["bounds"])


def test_demo_checks_its_folder_before_any_release(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run(capsys, "demo", "--out", str(blocker / "sub"), "--seed", "1")
    assert code == 2 and "==" not in out and err.count("\n") == 1


# ---------------------------------------------------------------- 3. inapplicable flags


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--categories", "a", "b", "c"], "--categories is for dirichlet-categorical"),
        (["--bounds", "0", "20"], "--bounds is for normal-mean"),
        (["--noise-sd", "2"], "--noise-sd is for normal-mean"),
        (["--sensitivity", "smooth"], "--sensitivity is for --mechanism expmech"),
        (["--lattice", "10"], "--lattice is for --mechanism expmech"),
        (["--prior", "1"], "--prior takes 2 values (alpha beta for beta-bernoulli), got 1"),
        (["--model", "normal-mean", "--bounds", "20", "0"], "--bounds LOWER UPPER needs LOWER <"),
        (["--model", "normal-mean", "--noise-sd", "-1"], "--noise-sd must be > 0"),
        (["--model", "normal-mean", "--prior", "1", "2", "3"], "--prior takes 2 values"),
        (["--level", "1.5"], "--level"),
    ],
)
def test_inapplicable_or_bad_flags_are_refused_by_name(
    tmp_path: Path, capsys, args: list[str], needle: str
) -> None:
    path = ledger(tmp_path)
    code, out, err = run(capsys, "release", "--epsilon", "1", "--budget-file", str(path), *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
    assert spent(path) == 0.0


def test_privatize_reads_parquet_and_takes_categories_one_way(tmp_path: Path, capsys) -> None:
    frame = pd.DataFrame({"x": [0.5, -1.0, 2.0] * 20, "c": ["a", "b", "c"] * 20})
    frame.to_parquet(tmp_path / "in.parquet")
    out_csv = tmp_path / "out.csv"
    base = ["privatize", "--data", str(tmp_path / "in.parquet"), "--out", str(out_csv)]
    code, out, err = run(capsys, *base, "--column", "x", "--epsilon", "1", "--r", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["count"] == 60 and len(pd.read_csv(out_csv)) == 60
    code, out, err = run(
        capsys,
        *base,
        "--column",
        "c",
        "--mechanism",
        "randomized-response",
        "--categories",
        "a",
        "b",
        "c",
        "--epsilon",
        "2",
    )
    assert code == 0, err
    assert set(pd.read_csv(out_csv)["c"]) <= {"a", "b", "c"}
    code, out, err = run(capsys, *base, "--column", "x", "--epsilon", "1", "--categories", "a")
    assert code == 2 and "--categories is for randomized-response" in err


def test_privatize_keeps_every_row_and_quotes_no_value(tmp_path: Path, capsys) -> None:
    """A blank line in a one-column CSV is a missing value (refused), not a skipped row: a
    skipped row changed the released count and misaligned output and input rows. A value
    outside the public categories is refused without quoting it (it is data)."""
    out_csv = tmp_path / "out.csv"
    for text, column, extra in (
        ("h\na\n\nb\n", "h", ["--mechanism", "randomized-response", "--categories", "a", "b"]),
        ("x\n0.5\n\n0.25\n", "x", ["--r", "1"]),
    ):
        (tmp_path / "in.csv").write_text(text)
        code, _, err = run(
            capsys, "privatize", "--data", str(tmp_path / "in.csv"), "--column", column,
            "--epsilon", "1", "--out", str(out_csv), *extra,
        )  # fmt: skip
        assert code == 2 and "missing" in err and not out_csv.exists(), err
    (tmp_path / "in.csv").write_text("h\na\nbob@example.com\n")
    code, _, err = run(
        capsys, "privatize", "--data", str(tmp_path / "in.csv"), "--column", "h", "--epsilon",
        "1", "--out", str(out_csv), "--mechanism", "randomized-response", "--categories", "a", "b",
    )  # fmt: skip
    assert code == 2 and "categories" in err and "bob" not in err


def test_audit_refuses_a_huge_n_in_one_line() -> None:
    r = dpbayes(
        "audit", "--model", "beta-bernoulli", "--mechanism", "laplace", "--n", "1000000000000"
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--n must be between 1 and" in r.stderr


# ---------------------------------------------------------------- 4. release files checked


def _record(capsys) -> dict:
    code, out, _ = run(
        capsys, "release", "--epsilon", "1", "--seed", "1", "--record-level", "--json"
    )
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["released"].update(counts=[-5, 1e9]), "outside [0, n] (n = 20190)"),
        (lambda d: d["released"].update(counts=[1.0, float("nan")]), "finite"),
        (lambda d: d["released"].update(counts=[1.0]), "must list 2 numbers"),
        (lambda d: d.update(version=99), "'version' 99 is not supported"),
        (lambda d: d.update(format="other"), "'format' must be 'dpbayes-release'"),
        (lambda d: d.pop("guarantee"), "missing field(s) guarantee"),
        (
            lambda d: d["guarantee"].update(mechanism="expmech (hellinger, global sensitivity)"),
            "the guarantee is for mechanism 'expmech",
        ),
        (lambda d: d["guarantee"].update(sensitivity=0.01), "does not match the public"),
        (lambda d: d.update(mechanism="fourier"), "does not release BetaBernoulli"),
    ],
)
def test_inconsistent_release_records_are_refused(
    tmp_path: Path, capsys, edit: Any, needle: str
) -> None:
    import dpbayes as dpb

    d = _record(capsys)
    edit(d)
    with pytest.raises(ValueError, match="release record") as exc:
        dpb.Release.from_dict(d)
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    code, out, err = run(capsys, "posterior", "--release", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"\x89PNG\r\n", "not UTF-8"), (b"{nope", "not a JSON release record"), (b"[]", "object")],
)
def test_unreadable_release_files_are_one_line(
    tmp_path: Path, capsys, content: bytes, needle: str
) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    code, _, err = run(capsys, "posterior", "--release", str(path))
    assert code == 2 and err.count("\n") == 1 and needle in err


def test_from_dict_round_trips_network_and_regression_releases() -> None:
    import numpy as np

    import dpbayes as dpb
    from dpbayes.models.bayes_net import BayesNet, NaiveBayes
    from dpbayes.models.linear_regression import BayesianLinearRegression

    df = pd.DataFrame({"a": [0, 1, 1, 0] * 25, "b": ["x", "y", "y", "x"] * 25})
    bn = BayesNet({"a": [0, 1], "b": ["x", "y"]}, edges=[("a", "b")], alpha=1.0)
    nb = NaiveBayes("a", [0, 1], {"b": ["x", "y"]})
    rels = [dpb.release(bn, df, mechanism=m, epsilon=1.0, rng=1) for m in ("laplace", "map")]
    rels.append(dpb.release(nb, df, mechanism="laplace", epsilon=1.0, rng=2))
    x = np.tile([[0.5, 1.0], [1.0, 0.2]], (50, 1))
    reg = BayesianLinearRegression(
        prior_precision=1.0,
        noise_variance=1.0,
        feature_bound=2.0,
        label_bound=4.0,
        weight_bound=5.0,
    )
    rels.append(dpb.release(reg, (x, x @ [1.0, 2.0]), mechanism="sampling", epsilon=3.0, rng=3))
    for rel in rels:
        back = dpb.Release.from_dict(json.loads(rel.to_json()))
        assert back.mechanism == rel.mechanism and back.guarantee == rel.guarantee
        assert back.model.to_dict() == rel.model.to_dict() and back.released == rel.released
        assert json.dumps(back.to_dict()) == json.dumps(rel.to_dict())


# ---------------------------------------------------------------- 5. a price before the purchase


def test_dry_run_prints_the_price_reads_no_data_and_spends_nothing(tmp_path: Path, capsys) -> None:
    path = ledger(tmp_path, eps=1.0)
    # the data file does not exist: a dry run never opens it
    own = ["--data", str(tmp_path / "absent.csv"), "--column", "smoker"]
    code, out, err = run(
        capsys, "release", *own, "--epsilon", "0.4", "--budget-file", str(path), "--dry-run"
    )
    assert code == 0, err
    assert "nothing spent" in out and "0.4-DP, substitute one record" in out
    assert f"{path}: eps 1, delta 0 remaining; this release fits" in out
    code, out, err = run(
        capsys, "release", "--epsilon", "2", "--budget-file", str(path), "--dry-run", "--json"
    )
    doc = json.loads(out)
    assert code == 2 and doc["ledger"]["fits"] is False and doc["cost"]["epsilon"] == 2.0
    assert "add/remove one user (<= 5 rows)" in doc["guarantee_text"]
    assert err.count("\n") == 1 and "budget exceeded (dry run)" in err
    assert spent(path) == 0.0


# ---------------------------------------------------------------- 7. one privacy unit


def test_the_library_and_the_cli_protect_the_same_unit(capsys) -> None:
    import dpbayes as dpb
    from dpbayes.data import bundled_table

    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    for record_level, flags in ((False, []), (True, ["--record-level"])):
        lib = dpb.release(
            model,
            bundled_table("randhie", record_level=record_level),
            column="hlthp",
            mechanism="laplace",
            epsilon=1,
            rng=1,
        )
        code, out, _ = run(capsys, "release", "--epsilon", "1", "--seed", "1", "--json", *flags)
        assert code == 0
        assert json.loads(out)["guarantee"] == lib.guarantee.to_dict()
        unit = "substitute one record" if record_level else "add/remove one user (<= 5 rows)"
        assert unit in lib.guarantee.describe()
    with pytest.raises(TypeError, match="record_level"):
        bundled_table(record_level="yes")  # type: ignore[arg-type]


# ---------------------------------------------------------------- 8. one exit/stream rule


def test_every_command_reports_errors_as_one_line_exit_2(tmp_path: Path, capsys) -> None:
    path = ledger(tmp_path, eps=0.5)
    failing = [
        ["release", "--epsilon", "1", "--budget-file", str(path)],  # budget exhausted
        ["budget", "show", str(tmp_path / "absent.ledger")],
        ["posterior", "--release", str(tmp_path / "absent.json")],
        ["audit", "--model", "beta-bernoulli", "--mechanism", "laplace", "--n", "0"],
        ["privatize", "--data", str(tmp_path / "a.csv"), "--column", "x", "--epsilon", "1",
         "--out", str(tmp_path / "o.csv")],
        ["query", "--state", str(tmp_path / "q"), "--half-width", "1", "--confidence", "0.9"],
        # a refused query (this budget cannot buy that accuracy): exit 2, stderr, like the rest
        ["query", "--state", str(tmp_path / "r"), "--attributes", "idp=0,1", "--epsilon",
         "0.01", "--where", "idp = 1", "--half-width", "0.5", "--confidence", "0.99"],
    ]  # fmt: skip
    for args in failing:
        code, out, err = run(capsys, *args)
        assert code == 2 and out == "", (args, out)
        assert err.startswith("dpbayes: error: ") and err.count("\n") == 1, (args, err)


# ---------------------------------------------------------------- 9. plots that tell the truth


def _capture_figures(monkeypatch) -> list[Any]:
    import matplotlib.figure

    figures: list[Any] = []
    original = matplotlib.figure.Figure.savefig

    def savefig(self: Any, *args: Any, **kwargs: Any) -> None:
        figures.append(
            {
                "suptitle": self._suptitle.get_text() if self._suptitle else "",
                "titles": [ax.get_title() for ax in self.axes],
                "legend": [t.get_text() for t in self.axes[0].get_legend().get_texts()],
                "ylabel": self.axes[0].get_ylabel(),
            }
        )
        original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return figures


def test_dirichlet_plot_names_the_categories_and_leads_with_noise_aware(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    figures = _capture_figures(monkeypatch)
    png = tmp_path / "health.png"
    code, _, err = run(
        capsys, "release", "--model", "dirichlet-categorical", "--epsilon", "0.5", "--seed", "1",
        "--plot", str(png),
    )  # fmt: skip
    assert code == 0, err
    assert png.stat().st_size > 1000
    (fig,) = figures
    assert fig["titles"] == ["P(excellent)", "P(good)", "P(fair)", "P(poor)"]
    assert fig["legend"][0] == "noise-aware posterior" and "naive" in fig["legend"][1]
    assert "prior" not in " ".join(fig["legend"])  # no flat prior squashing the curves


def test_demo_figures_say_the_exact_curve_is_the_curators_and_titles_wrap(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    figures = _capture_figures(monkeypatch)
    code, _, err = run(capsys, "demo", "--out", str(tmp_path / "d"), "--seed", "2", "--quiet")
    assert code == 0, err
    assert len(figures) == 3
    for fig in figures:
        assert fig["legend"][0] == "noise-aware posterior"
        assert any("curator only" in t for t in fig["legend"])
        assert all(len(line) <= 100 for line in fig["suptitle"].splitlines())
        assert "add/remove one user (<= 5 rows)" in fig["suptitle"].replace("\n", " ")


# ---------------------------------------------------------------- issue 21 item 5


def test_version_json_everywhere_and_out_alias(tmp_path: Path, capsys) -> None:
    from importlib.metadata import version

    r = dpbayes("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"dpbayes {version('dpbayes')}"
    code, out, _ = run(capsys, "budget", "init", str(tmp_path / "l"), "--epsilon", "1", "--json")
    assert code == 0 and json.loads(out)["total"]["epsilon"] == 1.0
    code, out, _ = run(capsys, "experiment", "--json")
    assert code == 0 and json.loads(out)["experiments"]
    for flag in ("--out", "--plot"):
        png = tmp_path / f"{flag[2:]}.png"
        code, out, _ = run(capsys, "release", "--epsilon", "1", "--seed", "1", flag, str(png))
        assert code == 0 and png.read_bytes()[:4] == b"\x89PNG" and f"figure:      {png}" in out


def test_query_takes_attributes_one_way(tmp_path: Path, capsys) -> None:
    code, out, err = run(
        capsys, "query", "--state", str(tmp_path / "s"), "--attributes",
        "health=excellent,good,fair,poor", "idp=0,1", "--epsilon", "1", "--where",
        "health = poor and idp = 1", "--half-width", "400", "--confidence", "0.9", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["status"] == "fresh"
    spec = json.loads((tmp_path / "s" / "cube.json").read_text())
    assert set(spec["attributes"]) == {"health", "idp"}


# ---------------------------------------------------------------- review: outputs of every command


def _csv(tmp_path: Path) -> Path:
    data = tmp_path / "d.csv"
    pd.DataFrame({"x": [0.5, -0.25, 1.0, 0.0]}).to_csv(data, index=False)
    return data


@pytest.mark.parametrize("clash", ["out-json", "sidecar-json", "out-data"])
def test_privatize_outputs_are_checked_against_each_other_and_the_data(
    tmp_path: Path, capsys, clash: str
) -> None:
    """A review found `--out p.csv --json p.csv` exiting 0 with p.csv holding only the
    JSON summary (every privatised value lost); an --out onto --data erases the data."""
    data = _csv(tmp_path)
    raw = data.read_bytes()
    p = tmp_path / "p.csv"
    outputs = {
        "out-json": ["--out", str(p), "--json", str(p)],
        "sidecar-json": ["--out", str(p), "--json", str(tmp_path / "p.guarantee.json")],
        "out-data": ["--out", str(data)],
    }[clash]
    code, out, err = run(
        capsys, "privatize", "--data", str(data), "--column", "x", "--epsilon", "1", "--r", "1",
        *outputs,
    )  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "--out" in err and ("--json" in err or "--data" in err)
    assert data.read_bytes() == raw and not p.exists()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["d.csv"]


def test_privatize_json_failing_after_the_values_are_written_says_where_they_are(
    tmp_path: Path, capsys, monkeypatch, full_disk_json
) -> None:
    monkeypatch.setattr("dpbayes.cli.cmd_privatize.emit_json", full_disk_json)
    data, p = _csv(tmp_path), tmp_path / "p.csv"
    code, out, err = run(
        capsys, "privatize", "--data", str(data), "--column", "x", "--epsilon", "1", "--r", "1",
        "--out", str(p), "--json", str(tmp_path / "s.json"),
    )  # fmt: skip
    assert code == 2 and json.loads(out)["count"] == 4 and len(pd.read_csv(p)) == 4
    assert err.count("\n") == 1 and "--json" in err and "No space left" in err
    assert f"written to --out {p}" in err and "Errno" not in err


@pytest.mark.parametrize("case", ["json-release", "out-release", "format", "folder"])
def test_posterior_never_writes_over_its_release_and_checks_first(
    tmp_path: Path, capsys, monkeypatch, case: str
) -> None:
    """`posterior --release R --json R` (or `--out R`) overwrote the record it reads; an
    unknown figure format was found after the posterior; a folder gave a raw [Errno 21]."""
    import importlib

    base = importlib.import_module("dpbayes.release.base")
    rec = tmp_path / "rel.json"
    code, _, _ = run(capsys, "release", "--epsilon", "1", "--seed", "1", "--json", str(rec))
    assert code == 0
    raw = rec.read_bytes()
    computed: list[Any] = []
    monkeypatch.setattr(base, "noise_aware_posterior", lambda *a, **k: computed.append(a))
    args, needle = {
        "json-release": (["--release", str(rec), "--json", str(rec)], "--json"),
        "out-release": (["--release", str(rec), "--out", str(rec)], "--out"),
        "format": (["--release", str(rec), "--out", str(tmp_path / "f.xyz")], "--out"),
        "folder": (["--release", str(tmp_path)], f"--release {tmp_path}: is a folder"),
    }[case]
    code, out, err = run(capsys, "posterior", *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
    assert "Errno" not in err and computed == [] and rec.read_bytes() == raw


@pytest.mark.parametrize("case", ["figure-is-a-folder", "json-is-a-figure"])
def test_demo_checks_every_figure_before_the_first_release(
    tmp_path: Path, capsys, case: str
) -> None:
    folder = tmp_path / "d"
    if case == "figure-is-a-folder":
        (folder / "demo_health.png").mkdir(parents=True)
        extra: list[str] = []
    else:
        extra = ["--json", str(folder / "demo_mdvis.png")]
    code, out, err = run(capsys, "demo", "--out", str(folder), "--seed", "1", "--quiet", *extra)
    assert code == 2 and "==" not in out and err.count("\n") == 1, (out, err)
    assert "--out's" in err and "Errno" not in err
    assert not (folder / "demo_hlthp.png").exists()  # nothing drawn


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["release", "--model", "normal-mean", "--bounds", "0", "inf"],
            "--bounds LOWER UPPER must be finite",
        ),
        (
            ["release", "--model", "normal-mean", "--bounds", "nan", "1"],
            "--bounds LOWER UPPER must be finite",
        ),
        (["release", "--prior", "-1", "1"], "--prior values must be finite and > 0"),
        (["release", "--model", "dirichlet-categorical", "--prior", "0"], "--prior values"),
        (["release", "--model", "normal-mean", "--prior", "0", "-1"], "--prior needs"),
        (["release", "--model", "normal-mean", "--noise-sd", "inf"], "--noise-sd must be > 0"),
        (["budget", "init", "{tmp}/nodir/x.json"], "{tmp}/nodir/x.json: folder"),
        (["query", "--half-width", "-5", "--confidence", "0.9"], "--half-width must be > 0"),
        (["query", "--half-width", "5", "--confidence", "1.5"], "--confidence must be in (0, 1)"),
    ],
)
def test_errors_name_the_flag_not_the_library_argument(
    tmp_path: Path, capsys, args: list[str], needle: str
) -> None:
    """A review found `noise_sd must be finite` for --bounds, `alpha must be > 0` for
    --prior, a raw [Errno 2] on the ledger's lock for a missing folder, and `half_width`
    for --half-width."""
    path = ledger(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    extra = {
        "release": ["--epsilon", "1", "--budget-file", str(path)],
        "budget": ["--epsilon", "1"],
        "query": ["--state", str(tmp_path / "q"), "--attribute", "idp=0,1", "--epsilon", "1",
                  "--where", "idp = 1"],
    }[args[0]]  # fmt: skip
    code, out, err = run(capsys, *args, *extra)
    needle = needle.replace("{tmp}", str(tmp_path))
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
    assert "Errno" not in err and "_" not in err.split("error: ")[1].split(" ")[0]
    assert spent(path) == 0.0 and not (tmp_path / "q").exists()


def test_a_sigterm_during_a_long_noise_aware_posterior_still_prints_the_release(
    tmp_path: Path,
) -> None:
    """A real process: the add/remove Normal mean at eps 1e-3 sums over the private n for
    seconds after the charge. `timeout` (SIGTERM) there used to end the process with
    nothing printed while the ledger showed the spend. The release is announced on stderr
    before the long step, and SIGTERM ends it like Ctrl+C: printed, recorded, exit 130."""
    import signal

    path = ledger(tmp_path)
    rec = tmp_path / "rel.json"
    proc = subprocess.Popen(
        [
            sys.executable, "-c", "from dpbayes.cli import main; raise SystemExit(main())",
            "release", "--model", "normal-mean", "--epsilon", "1e-3",
            "--neighbours", "add-remove", "--budget-file", str(path), "--json", str(rec),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.startswith("dpbayes: the release was made and charged to --budget-file "), first
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "released:" in out and "unavailable: interrupted" in out
    assert json.loads(rec.read_text())["released"]
    assert spent(path) == pytest.approx(1e-3)


def test_a_failed_record_write_leaves_no_partial_file(tmp_path: Path, monkeypatch) -> None:
    """A review found a full disk leaving a 0-byte `--json` record (a later `posterior
    --release` on it failed) and a ledger write failure reported as a bare `[Errno 28]`
    with `.tmp` files left behind. A record appears whole or not at all, and a ledger that
    cannot be written says so and that nothing was spent. (The failure is injected at the
    system call: a real full disk needs a mount.)"""
    import errno
    import os

    from dpbayes.cli import common
    from dpbayes.privacy import Accountant, LedgerError

    old = tmp_path / "r.json"
    old.write_text('{"old": 1}\n')

    def full(*_: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(common.os, "replace", full)
    with pytest.raises(OSError, match="No space"):
        common.emit_json({"new": 2}, str(old))
    assert old.read_text() == '{"old": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    monkeypatch.undo()
    link = tmp_path / "link.json"  # a link is written through, not replaced
    link.symlink_to(old)
    common.emit_json({"new": 3}, str(link))
    assert link.is_symlink() and old.read_text() == '{"new": 3}\n'
    link.unlink()

    book = tmp_path / "book.json"
    acc = Accountant(2.0, path=book)
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(LedgerError, match=r"could not be written .*nothing was spent"):
        acc.spend(0.5)
    monkeypatch.undo()
    assert acc.spent == (0.0, 0.0) and Accountant.open(book).spent == (0.0, 0.0)
    assert not (tmp_path / "book.json.tmp").exists()


def test_bad_files_and_columns_are_named_by_their_flags(tmp_path: Path, capsys) -> None:
    """A missing user column is named by its flag, and a CSV whose body is not UTF-8 (its
    header is) says so instead of quoting the codec."""
    q = tmp_path / "q.csv"
    q.write_text("u,x\n1,0\n2,1\n")
    code, _, err = run(
        capsys,
        *["release", "--data", str(q), "--column", "x", "--epsilon", "1", "--seed", "1"],
        *["--user-column", "nope", "--max-rows-per-user", "1"],
    )
    assert code == 2 and "--user-column 'nope' not found" in err and err.count("\n") == 1
    latin = tmp_path / "l1.csv"
    latin.write_bytes(b"x\n\xe9\n")
    code, _, err = run(
        capsys,
        *["privatize", "--data", str(latin), "--column", "x", "--mechanism"],
        *["randomized-response", "--categories", "a", "b", "--epsilon", "1", "--seed", "1"],
        *["--out", str(tmp_path / "o.csv")],
    )
    assert code == 2 and "--data" in err and "not UTF-8" in err and err.count("\n") == 1


def test_a_dry_run_refuses_what_the_release_would_refuse(tmp_path: Path, capsys) -> None:
    """A review found a dry run saying "fits" for an add/remove release on a budget of
    substitute spends, which the real run then refused. The dry run asks the same."""
    path = ledger(tmp_path, eps=10.0)
    data = tmp_path / "d.csv"
    pd.DataFrame({"x": [0, 1, 1, 0, 1]}).to_csv(data, index=False)
    common = ["release", "-q", "--data", str(data), "--column", "x", "--epsilon", "1"]
    code, _, err = run(capsys, *common, "--budget-file", str(path))
    assert code == 0, err
    code, out, err = run(
        capsys, *common, "--budget-file", str(path), "--neighbours", "add-remove", "--dry-run"
    )
    assert code == 2 and "does NOT fit" in out and "do not add up" in err, (out, err)
    assert spent(path) == 1.0
