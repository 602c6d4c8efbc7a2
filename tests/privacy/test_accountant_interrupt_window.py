"""Ctrl+C or SIGTERM landing as the ledger's rename completes (CPython runs the handler
right after the C call): the spend is on disk, so it must be in memory too, and a caller
holding interrupts (the CLI) gets the charged block's result before the interrupt. A real
process, a real ledger file and a real signal, sent by the process to itself right after
the real os.replace returns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_CHARGE = """
import json, os, signal, sys
from dpbayes.privacy.accountant import Accountant, interrupts_held
name, path, hold = sys.argv[1], sys.argv[2], sys.argv[3] == "hold"
acc = Accountant(5.0, path=path)
real = os.replace
def replace(src, dst, *args, **kwargs):
    real(src, dst, *args, **kwargs)
    if str(dst) == path:
        os.kill(os.getpid(), getattr(signal, name))
os.replace = replace
if name == "SIGTERM":
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)
result = None
try:
    with interrupts_held() if hold else open(os.devnull) as deliver:
        with acc.charge(1.0, label="q"):
            result = 42
        print("after the charge", result, flush=True)
        if hold:
            deliver()
        print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
os.replace = real
on_disk = len(json.loads(open(path).read())["spends"])
# the spends in memory as they are (acc.spends would read the file again)
print(json.dumps({"memory": len(acc._spends), "disk": on_disk, "result": result}))
"""


@pytest.mark.parametrize("hold", [False, True])
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_interrupt_as_the_ledger_lands_keeps_memory_and_disk_together(
    tmp_path: Path, name: str, hold: bool
) -> None:
    """The spend was popped from memory while the file kept it; the block's result was lost."""
    path = str(tmp_path / "ledger.json")
    out = subprocess.run(
        [sys.executable, "-c", _CHARGE, name, path, "hold" if hold else "no"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert json.loads(lines[-1]) == {"memory": 1, "disk": 1, "result": 42}, out
    # without a hold the interrupt comes at the end of the charge; with one, when delivered
    assert lines[:-1] == (["after the charge 42", "interrupted"] if hold else ["interrupted"]), out
