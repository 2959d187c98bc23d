"""The Python examples (`python/examples/*.py`: the seed's spellings, one per tier) run as
written in a fresh interpreter, with a shorter budget: `total_timesteps=N` is the one thing
changed. Each must train, predict and exit cleanly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BUDGETS = {
    "ppo_cartpole.py": 4096,
    "a2c_cartpole.py": 1000,
    "trpo_pendulum.py": 2048,
    "impala_cartpole.py": 2000,
    "ppg_cartpole.py": 1024,
    "recurrent_ppo_cartpole.py": 512,
}


def test_every_example_has_a_budget():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(BUDGETS)


@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_example_runs_with_a_shorter_budget(name, tmp_path):
    text = (EXAMPLES / name).read_text()
    short, n = re.subn(r"total_timesteps=[0-9_]+", f"total_timesteps={BUDGETS[name]}", text)
    assert n == 1, f"{name}: expected one total_timesteps=…"
    script = tmp_path / name
    script.write_text(short)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{name} failed:\n{out.stdout}\n{out.stderr}"
    assert re.search(r"^(return|action) ", out.stdout, re.M), out.stdout
