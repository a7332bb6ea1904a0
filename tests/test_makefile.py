"""The Makefile's recipes, read with ``make -n`` (printed, not run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def dry_run(target: str, tmp_path: Path) -> list[str]:
    """The commands ``make TARGET`` would run with a fresh (missing) virtualenv."""
    out = subprocess.run(["make", "-n", "-C", str(ROOT), f"VENV={tmp_path / 'venv'}", target],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.splitlines()


@pytest.mark.parametrize("target", ["demo", "test"])
def test_the_first_install_says_what_it_does_and_shows_pips_progress(tmp_path, target):
    # (it was `pip install --quiet`: minutes of silence before the demo's first line)
    lines = dry_run(target, tmp_path)
    install = next(i for i, line in enumerate(lines) if " -m pip " in line and " install " in line)
    assert "--quiet" not in lines[install].split() and " -q" not in lines[install]
    assert lines[install - 2].startswith("echo \"installing fairshare")
    assert "the first time" in lines[install - 1]
