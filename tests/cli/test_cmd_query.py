"""``dpbayes query``: in process through ``cli.main``, and once end to end by subprocess."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dpbayes.cli import main
from dpbayes.data import bundled_path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["query", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_query_creates_continues_and_refuses(tmp_path: Path, capsys) -> None:
    state = str(tmp_path / "st")
    code, a = run_json(
        capsys, "--state", state, "--data", str(bundled_path("randhie")),
        "--attribute", "health=excellent,good,fair,poor", "--attribute", "mdvis=bins:0,1,5,inf",
        "--epsilon", "1", "--where", "health = poor", "--half-width", "20",
        "--confidence", "0.95",
    )  # fmt: skip
    assert code == 0 and a["status"] == "fresh" and a["epsilon"] > 0
    # the bundled data: one person (<= 5 rows) by default, S = 5: eps = 5 ln(1/(1-p)) / d
    assert "add/remove one user (<= 5 rows)" in a["guarantee"]
    assert a["privacy_unit"] == "one user ('person', <= 5 rows)"
    assert a["epsilon"] == pytest.approx(5 * math.log(20) / 20, rel=2e-3)
    code, b = run_json(
        capsys, "--state", state, "--where", "health = poor", "--half-width", "30",
        "--confidence", "0.9",
    )  # fmt: skip
    assert code == 0 and b["status"] == "history" and b["epsilon"] == 0.0
    assert b["estimate"] == a["estimate"]
    assert b["remaining_epsilon"] == a["remaining_epsilon"]
    code = main(
        ["query", "--state", state, "--where", "mdvis >= 5", "--half-width", "0.1",
         "--confidence", "0.99"]
    )  # fmt: skip
    # issue 16 item 8: a refusal follows the one rule: exit 2, one line on stderr
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and out.err.startswith("dpbayes: error: refused")
    assert out.err.count("\n") == 1
    ledger = json.loads((tmp_path / "st" / "ledger.json").read_text())
    assert len(ledger["spends"]) == 1
    # End to end: a bad predicate is one line on stderr and exit code 2, nothing spent.
    bad = subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", "query", "--state", state, "--where",
         "health = bad", "--half-width", "30", "--confidence", "0.9"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and "not in the domain" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert len(json.loads((tmp_path / "st" / "ledger.json").read_text())["spends"]) == 1
    # the unit is fixed at the first call: asking for another one later is refused
    code = main(
        ["query", "--state", state, "--where", "health = poor", "--half-width", "30",
         "--confidence", "0.9", "--record-level"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "holds a cube protecting one user ('person', <= 5 rows)" in err


def test_query_units_default_bundled_record_level_and_own_data(tmp_path: Path, capsys) -> None:
    common = [
        "--attribute", "health=excellent,good,fair,poor", "--epsilon", "1",
        "--where", "health = poor", "--half-width", "100", "--confidence", "0.95",
    ]  # fmt: skip
    code, a = run_json(capsys, "--state", str(tmp_path / "b"), *common)  # no --data: bundled
    assert code == 0 and "add/remove one user (<= 5 rows)" in a["guarantee"]
    code, a = run_json(capsys, "--state", str(tmp_path / "r"), "--record-level", *common)
    assert code == 0 and "add/remove one record" in a["guarantee"]
    assert a["epsilon"] == pytest.approx(math.log(20) / 100, rel=2e-3)
    spec = json.loads((tmp_path / "r" / "cube.json").read_text())
    assert "privacy_unit" not in spec
    csv = tmp_path / "own.csv"
    csv.write_text("pid,health\n" + "".join(f"{i // 5},poor\n" for i in range(50)))
    own = ["--data", str(csv), *common]
    code, a = run_json(capsys, "--state", str(tmp_path / "o"), *own)
    assert code == 0 and "add/remove one record" in a["guarantee"]
    code, a = run_json(
        capsys, "--state", str(tmp_path / "u"), *own, "--user-column", "pid",
        "--max-rows-per-user", "2",
    )  # fmt: skip
    assert code == 0 and "add/remove one user (<= 2 rows)" in a["guarantee"]
    assert json.loads((tmp_path / "u" / "cube.json").read_text())["privacy_unit"] == {
        "user_column": "pid",
        "max_rows_per_user": 2,
    }
    for extra, words in [
        (["--user-column", "pid"], "--user-column needs --max-rows-per-user"),
        (["--max-rows-per-user", "0"], "--max-rows-per-user must be >= 1"),
        (["--record-level", "--user-column", "pid"], "--record-level excludes"),
    ]:
        code = main(["query", "--state", str(tmp_path / "x"), *own, *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "x" / "ledger.json").exists()


def test_query_needs_a_cube_first(tmp_path: Path, capsys) -> None:
    code = main(
        ["query", "--state", str(tmp_path / "x"), "--where", "a = 1", "--half-width", "1",
         "--confidence", "0.9"]
    )  # fmt: skip
    assert code == 2 and "first call needs" in capsys.readouterr().err


def test_query_refuses_seed_by_name_and_creates_nothing(tmp_path: Path, capsys) -> None:
    """Issue 14, defect 5: the engine spends a real ledger; seeded noise is never accepted."""
    code = main(
        ["query", "--state", str(tmp_path / "s"), "--attribute", "health=excellent,good,fair,poor",
         "--epsilon", "1", "--where", "health = poor", "--half-width", "100",
         "--confidence", "0.95", "--seed", "3"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--seed" in err
    assert not (tmp_path / "s").exists()


def test_query_noise_gaussian_and_auto_under_pld(tmp_path: Path, capsys) -> None:
    state = str(tmp_path / "g")
    first = [
        "--state", state, "--attribute", "health=excellent,good,fair,poor", "--record-level",
        "--epsilon", "5", "--delta", "1e-6", "--composition", "pld",
    ]  # fmt: skip
    code, a = run_json(
        capsys, *first, "--where", "health = poor", "--half-width", "50",
        "--confidence", "0.95", "--noise", "gaussian",
    )  # fmt: skip
    assert code == 0 and a["status"] == "fresh" and a["noise"] == "gaussian"
    assert a["delta"] == 1e-6 and "gaussian" in a["guarantee"]
    ledger = json.loads((tmp_path / "g" / "ledger.json").read_text())
    assert ledger["composition"] == "pld" and ledger["total"]["delta"] == 1e-6
    # sigma = d / z_0.975 at sensitivity 1: the ratio the PLD accountant composes
    assert ledger["spends"][0]["gaussian_ratio"] == pytest.approx(50 / 1.959964, rel=1e-6)
    code, b = run_json(
        capsys, "--state", state, "--where", "health = fair", "--half-width", "50",
        "--confidence", "0.95", "--noise", "auto",
    )  # fmt: skip
    assert code == 0 and b["status"] == "fresh" and b["noise"] == "gaussian"
    # a pld ledger takes Gaussian answers only: the default is Gaussian, Laplace refused
    code, c = run_json(
        capsys, "--state", state, "--where", "health = good", "--half-width", "50",
        "--confidence", "0.95",
    )  # fmt: skip
    assert code == 0 and c["status"] == "fresh" and c["noise"] == "gaussian"
    before = (tmp_path / "g" / "ledger.json").read_text()
    code = main(
        ["query", "--state", state, "--where", "health = excellent", "--half-width", "50",
         "--confidence", "0.95", "--noise", "laplace"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "noise='laplace'" in err
    assert (tmp_path / "g" / "ledger.json").read_text() == before


def test_query_noise_gaussian_needs_a_delta_and_creates_nothing(tmp_path: Path, capsys) -> None:
    code = main(
        ["query", "--state", str(tmp_path / "s"), "--attribute", "health=excellent,good,fair,poor",
         "--epsilon", "1", "--where", "health = poor", "--half-width", "100",
         "--confidence", "0.95", "--noise", "gaussian"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "noise='gaussian' needs a budget delta" in err
    assert not (tmp_path / "s" / "ledger.json").exists()


# ---------------------------------------------------- review: outputs, half-made states

FIRST = [
    "--attribute", "health=excellent,good,fair,poor", "--epsilon", "1",
    "--where", "health = poor", "--half-width", "100", "--confidence", "0.95",
]  # fmt: skip
STATE_FILES = ("ledger.json", "ledger.json.lock", "ledger.json.tmp", "history.jsonl", "cube.json")


@pytest.mark.parametrize("target", ["nodir", *STATE_FILES])
def test_query_json_is_checked_before_anything_is_spent(
    tmp_path: Path, capsys, target: str
) -> None:
    """A review found `--json nodir/x` spending the budget before a raw [Errno 2], and
    `--json STATE/ledger.json` erasing the ledger (exit 0). Both are refused first now."""
    state = tmp_path / "st"
    code, _ = run_json(capsys, "--state", str(state), *FIRST)
    assert code == 0
    (state / "ledger.json.tmp").write_text("")  # so that each state file exists
    before = {f: (state / f).read_bytes() for f in STATE_FILES}
    dest = tmp_path / "nodir" / "a.json" if target == "nodir" else state / target
    code = main(
        ["query", "--state", str(state), "--where", "health = fair", "--half-width", "100",
         "--confidence", "0.95", "--json", str(dest)]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and out.err.count("\n") == 1, out.err
    assert "--json" in out.err and "nothing was spent" in out.err
    assert {f: (state / f).read_bytes() for f in STATE_FILES} == before
    # on a first call, nothing is created either
    new = tmp_path / "new"
    dest = dest if target == "nodir" else new / target
    code = main(["query", "--state", str(new), *FIRST, "--json", str(dest)])
    assert code == 2 and "--json" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_query_json_failing_after_the_spend_prints_the_answer(
    tmp_path: Path, capsys, monkeypatch, full_disk_json
) -> None:
    monkeypatch.setattr("dpbayes.cli.cmd_query.emit_json", full_disk_json)
    state = tmp_path / "st"
    code = main(["query", "--state", str(state), *FIRST, "--json", str(tmp_path / "a.json")])
    out = capsys.readouterr()
    assert code == 2 and json.loads(out.out)["status"] == "fresh"  # paid for: never lost
    assert out.err.count("\n") == 1 and "--json" in out.err and "No space left" in out.err
    assert "spent" in out.err and "printed on stdout" in out.err
    # a first call that spent keeps its state: nothing is undone once a spend is recorded
    ledger = json.loads((state / "ledger.json").read_text())
    assert len(ledger["spends"]) == 1 and (state / "cube.json").exists()
    assert (state / "history.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (["--half-width", "-5"], "--half-width must be > 0, got -5.0"),
        (["--confidence", "1"], "--confidence must be in (0, 1), got 1.0"),
        (["--where", "helth = poor"], "--where: unknown attribute 'helth'"),
        (["--where", "health = bad"], "--where: ['bad'] not in the domain"),
        (["--epsilon", "-1"], "--epsilon must be > 0"),
        (["--noise", "gaussian"], "needs a budget delta"),
        (["--half-width", "0.01", "--confidence", "0.999"], "refused"),
    ],
)
def test_a_failed_first_query_leaves_no_state_and_the_retry_works(
    tmp_path: Path, capsys, bad: list[str], needle: str
) -> None:
    """A review found a failed first call leaving ledger.json and cube.json behind, so the
    corrected call was refused ('already holds a cube', 'epsilon differs')."""
    state = tmp_path / "a" / "st"
    code = main(["query", "--state", str(state), *FIRST, *bad])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "a").exists()
    code, a = run_json(capsys, "--state", str(state), *FIRST)
    assert code == 0 and a["status"] == "fresh"
