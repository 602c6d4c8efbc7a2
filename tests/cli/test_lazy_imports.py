"""``dpbayes --help`` and ``import dpbayes`` load no numeric or data library (fresh processes).

Correctness, not timing: each check runs in a new interpreter and reads ``sys.modules``.
The public names keep working: they import what they need on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "scipy", "pandas", "duckdb", "opendp", "numba", "matplotlib", "pyarrow")
SUBCOMMANDS = (
    "audit",
    "budget",
    "demo",
    "experiment",
    "posterior",
    "privatize",
    "query",
    "release",
    "serve",
)


def run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def loaded_after(statement: str) -> list[str]:
    code = (
        "import contextlib, io, json, sys\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    {statement}\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    return run(code)  # type: ignore[return-value]


def test_import_dpbayes_loads_no_numeric_library() -> None:
    assert loaded_after("import dpbayes") == []
    assert loaded_after("import dpbayes as dpb; dpb.release; dpb.__version__") == []
    assert loaded_after("import dpbayes.release, dpbayes.audit.names") == []


def test_cli_help_loads_no_numeric_library() -> None:
    assert loaded_after("from dpbayes.cli import main; main(['--help'])") == []


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_subcommand_help_loads_no_numeric_library(command: str) -> None:
    assert loaded_after(f"from dpbayes.cli import main; main([{command!r}, '--help'])") == []


def test_the_public_names_load_on_first_use() -> None:
    code = """
import json, inspect
import dpbayes as dpb
from dpbayes.release import Plan, Release, mechanisms_for, plan, register, registered
from dpbayes.release import expmech  # a sub-module, not a lazy name
from dpbayes.release import base
model = dpb.models.BetaBernoulli(alpha=1, beta=1)
rel = dpb.release(model, [0, 1, 1, 0, 1], mechanism="laplace", epsilon=1.0, rng=0)
ledger = dpb.Accountant(2.0, simulation=True)
rel2 = dpb.release(model, [0, 1, 1], mechanism="expmech", epsilon=1.0, rng=1,
                   accountant=ledger)
print(json.dumps({
    "release_is_function": inspect.isfunction(dpb.release),
    "release_params": list(inspect.signature(dpb.release).parameters),
    "is_release": isinstance(rel, dpb.Release) and dpb.Release is Release is base.Release,
    "spent": ledger.spent[0],
    "mechanisms": mechanisms_for(model),
    "same_registry": dpb.mechanisms_for(model) == mechanisms_for(model),
    "plan": plan is base.plan and Plan is base.Plan and register is base.register,
    "expmech": expmech.__name__,
    "guarantee": dpb.Guarantee is type(rel.guarantee),
    "neighbours": dpb.Neighbours.SUBSTITUTE.value,
    "budget": issubclass(dpb.BudgetExceeded, ValueError),
    "privacy": dpb.privacy.Accountant is dpb.Accountant,
    "registered": sorted(f"{m} {t.__name__}" for m, t in registered()),
}))
"""
    out = run(code)
    assert out["release_is_function"]
    assert out["release_params"][:4] == ["model", "data", "mechanism", "epsilon"]
    assert out["is_release"] and out["same_registry"] and out["plan"] and out["guarantee"]
    assert out["spent"] == pytest.approx(1.0)
    # every family registered on the registry's first use, with nothing imported by hand
    assert {"laplace", "geometric", "gaussian", "expmech", "input"} <= set(out["mechanisms"])
    assert out["expmech"] == "dpbayes.release.expmech"
    assert out["neighbours"] == "substitute"
    assert out["budget"] and out["privacy"]
    assert out["registered"] == every_registration()


def every_registration() -> list[str]:
    """The registry after importing every module of dpbayes.release (and of its family
    folders) that calls register."""
    import dpbayes

    folder = Path(dpbayes.__file__).parent / "release"
    modules = sorted(
        ".".join(p.relative_to(folder).with_suffix("").parts)
        for p in folder.rglob("*.py")
        if "@register(" in p.read_text() or "register(mech" in p.read_text()
    )
    assert len(modules) >= 6, modules
    code = (
        "import importlib, json\n"
        f"for m in {modules!r}: importlib.import_module('dpbayes.release.' + m)\n"
        "from dpbayes.release.base import _REGISTRY\n"
        "print(json.dumps(sorted(f'{m} {t.__name__}' for m, t in _REGISTRY)))"
    )
    return run(code)  # type: ignore[return-value]


def test_unknown_attributes_raise_attribute_error() -> None:
    import dpbayes

    package = sys.modules["dpbayes.release"]  # dpbayes.release is the function
    with pytest.raises(AttributeError, match="'dpbayes' has no attribute 'nonsense'"):
        _ = dpbayes.nonsense  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"'dpbayes\.release' has no attribute 'nonsense'"):
        _ = package.nonsense
    assert {"Release", "models", "release"} <= set(dir(dpbayes))
    assert {"Release", "plan", "release"} <= set(dir(package))
