"""A ledger reached through a link stays one ledger; restored spends are checked; a pld
budget takes spends whose eps the PLD library cannot represent (from a review)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpbayes.privacy import Accountant, BudgetExceeded, LedgerError
from dpbayes.privacy.spend import Spend


def test_a_ledger_opened_through_a_symlink_is_the_same_ledger(tmp_path: Path) -> None:
    """The save replaced the link itself with a new file (and locked beside it): the two
    names became two ledgers, and 1.5 of a budget of 1 was spent between them."""
    real, link = tmp_path / "ledger.json", tmp_path / "shared.json"
    a = Accountant(1.0, path=real)
    os.symlink(real, link)
    a.spend(0.3)
    b = Accountant.open(link)
    b.spend(0.6)
    assert link.is_symlink()
    with pytest.raises(BudgetExceeded):
        a.spend(0.6)
    assert [s.epsilon for s in Accountant.open(real).spends] == [0.3, 0.6]
    assert Accountant.open(link).spent == pytest.approx((0.9, 0.0))


def test_a_new_ledger_created_through_a_symlinked_folder_is_found_by_both_names(
    tmp_path: Path,
) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    Accountant(1.0, path=tmp_path / "alias" / "ledger.json").spend(0.5)
    assert Accountant.open(tmp_path / "real" / "ledger.json").spent == pytest.approx((0.5, 0))


def test_a_hard_linked_ledger_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "ledger.json"
    Accountant(1.0, path=real)
    os.link(real, tmp_path / "other.json")
    for name in (real, tmp_path / "other.json"):
        with pytest.raises(LedgerError, match="other hard link"):
            Accountant.open(name)


@pytest.mark.parametrize("composition", ["basic", "rdp"])
def test_restore_checks_the_spend(composition: str) -> None:
    """A Spend built directly with a negative eps lowered the recorded total, so later
    charges overspent."""
    acc = Accountant(1.0, 1e-6, composition=composition)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        acc.restore(Spend(epsilon=-1e9, delta=0.0))
    with pytest.raises(BudgetExceeded):
        acc.spend(5.0)
    assert acc.spent == (0.0, 0.0)


def test_a_pld_ledger_holding_pure_spends_counts_them_by_basic_composition() -> None:
    """A pld ledger written before it took Gaussian spends only may hold pure spends (read
    back, as the service's rows are): the PLD check is no valid filter for them, so the
    ledger counts basic composition; a new pure spend is refused. (A spend of eps 800
    also once raised OverflowError in the library, which takes exp(eps).)"""
    acc = Accountant(2000.0, 1e-6, composition="pld")
    acc.restore(Spend(epsilon=1.0, delta=0.0))
    acc.restore(Spend(epsilon=0.5, delta=0.0))
    assert acc.spent == (1.5, 0.0)
    acc.restore(Spend(epsilon=800.0, delta=0.0))
    assert acc.spent[0] == pytest.approx(801.5)
    with pytest.raises(ValueError, match="takes Gaussian-noise spends only"):
        acc.spend(1.0)
    assert acc.spent[0] == pytest.approx(801.5)
    with pytest.raises(BudgetExceeded):
        acc.restore(Spend(epsilon=1500.0, delta=0.0))


def test_pld_does_not_build_a_huge_gaussian_pld() -> None:
    """A Gaussian spend at eps ~1000 (sigma/Delta 0.025) asked the library for a PLD of
    tens of millions of points (gigabytes): past 2e6 points it composes by basic
    composition, a valid bound."""
    acc = Accountant(5000.0, 1e-5, composition="pld")
    acc.restore(Spend(epsilon=1000.0, delta=1e-6, gaussian_ratio=0.025))
    acc.restore(Spend(epsilon=1.0, delta=1e-7, gaussian_ratio=4.0))
    assert acc.spent == pytest.approx((1001.0, 1.1e-6))


def test_a_hard_link_made_after_opening_is_refused_at_the_next_charge(tmp_path: Path) -> None:
    """Checked at open only, a link made later (a snapshot tool) kept the old file under
    its name at the next save: 1.2 of a budget of 1 spent between the two names."""
    real = tmp_path / "ledger.json"
    a = Accountant(1.0, path=real)
    os.link(real, tmp_path / "snapshot.json")
    with pytest.raises(LedgerError, match="other hard link"):
        a.spend(0.6)
    (tmp_path / "snapshot.json").unlink()
    assert Accountant.open(real).spent == (0.0, 0.0)


def test_the_clis_output_checks_name_the_ledgers_own_lock(tmp_path: Path) -> None:
    from dpbayes.cli.common import ledger_files

    (tmp_path / "real").mkdir()
    Accountant(1.0, path=tmp_path / "real" / "ledger.json")
    os.symlink(tmp_path / "real" / "ledger.json", tmp_path / "link.json")
    files = ledger_files(str(tmp_path / "link.json"))
    assert files["--budget-file's lock"] == str(tmp_path / "real" / "ledger.json.lock")
