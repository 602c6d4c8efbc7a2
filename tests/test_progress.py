"""Progress bars: drawn on a terminal after a delay, silent otherwise, silenced on request."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from dpbayes.progress import Progress, progress_enabled, set_progress, silenced


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _default(monkeypatch):
    monkeypatch.delenv("DPBAYES_PROGRESS", raising=False)
    set_progress(None)
    yield
    set_progress(None)


def test_bar_draws_on_a_terminal_and_erases_itself():
    out = _Tty()
    with Progress(200, "chains", unit="sweep", delay=0.0, stream=out) as bar:
        bar.update(50)
        drawn = out.getvalue()
    assert "chains:  25%|######" in drawn and "50/200 sweeps" in drawn
    final = out.getvalue()
    assert final.endswith("\r") and final[len(drawn) :].strip() == ""


def test_no_bar_when_not_a_terminal_or_before_the_delay():
    out = io.StringIO()
    with Progress(10, "x", delay=0.0, stream=out) as bar:
        bar.update(5)
    assert out.getvalue() == ""
    tty = _Tty()
    with Progress(10, "x", delay=60.0, stream=tty) as bar:
        bar.update(5)
    assert tty.getvalue() == ""


def test_silencing_global_context_and_environment(monkeypatch):
    tty = _Tty()
    assert progress_enabled(stream=tty)
    with silenced():
        assert not progress_enabled(stream=tty)
        with Progress(10, "x", delay=0.0, stream=tty) as bar:
            bar.update(5)
    assert tty.getvalue() == "" and progress_enabled(stream=tty)
    set_progress(False)
    assert not progress_enabled(stream=tty)
    set_progress(True)
    assert progress_enabled(stream=io.StringIO())  # forced without a terminal
    set_progress(None)
    monkeypatch.setenv("DPBAYES_PROGRESS", "0")
    assert not progress_enabled(stream=tty)
    monkeypatch.setenv("DPBAYES_PROGRESS", "1")
    assert progress_enabled(stream=io.StringIO())
    assert progress_enabled(False, stream=tty) is False  # an explicit choice wins


def test_bad_settings_are_type_errors():
    with pytest.raises(TypeError, match="enabled"):
        set_progress("yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="progress"):
        progress_enabled("yes")  # type: ignore[arg-type]


def test_unknown_total_counts_up():
    line = Progress(0, "audit experiment", unit="audit", show=False).line(3.0)
    assert line == "audit experiment: 0 audits [00:03]"


def test_a_broken_stream_disables_the_bar():
    out = _Tty()
    out.close()
    bar = Progress(10, "x", delay=0.0, stream=out, show=True)
    bar.update(1)  # no exception
    assert bar.enabled is False


def test_noise_aware_mcmc_draws_a_bar_when_forced(capsys, monkeypatch):
    import pandas as pd

    from dpbayes.models.bayes_net import BayesNet
    from dpbayes.release import release

    data = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1], "B": [0, 1, 1, 1, 0, 1]})
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, data, mechanism="laplace", epsilon=2.0, rng=5)
    monkeypatch.setattr(Progress, "DELAY", 0.0)
    set_progress(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rel.noise_aware_posterior(rng=7, iterations=200)
        assert "noise-aware Bayes-net MCMC" in capsys.readouterr().err
        set_progress(False)
        rel.noise_aware_posterior(rng=7, iterations=200)
    assert capsys.readouterr().err == ""


def test_the_auditor_reports_every_output(capsys, monkeypatch):
    from dpbayes.audit import audit
    from dpbayes.privacy.noise import noise_source

    def coin(data, gen, size):
        return noise_source(gen).laplace(np.full(size, float(sum(data))), 1.0)

    monkeypatch.setattr(Progress, "DELAY", 0.0)
    seen = []
    real_update = Progress.update
    monkeypatch.setattr(
        Progress, "update", lambda self, n=1.0: (seen.append(n), real_update(self, n))
    )
    set_progress(True)
    audit(coin, [([0, 1], [1, 1])], epsilon=1.0, samples=200, batch=True, rng=0)
    assert sum(seen) == 400  # both data sets, 200 outputs each
    assert "audit:" in capsys.readouterr().err
