"""The wheel works without a checkout: built with ``pip wheel``, installed in a fresh venv, run elsewhere.

The venv reuses this environment's pinned dependencies (torch among them) through a path file, so
the test installs only the wheel itself; it runs ``easerve sim`` on a shipped example by name and a
two-trial ``easerve search`` from a folder outside the repository.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("easerve", "easerve_core", "runtime", "sim", "live", "calibration")


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd[:3]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.slow
def test_wheel_runs_sim_and_search_outside_the_checkout(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: an in-tree build would leave build/ and *.egg-info in the checkout
    for name in PACKAGES:
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
          "-w", str(dist)], tmp_path, env)
    (wheel,) = dist.glob("easerve-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "easerve/configs/llava34b_rtx6000ada.toml" in names
    assert "calibration/specs/models/llava-v1.6-34b.json" in names
    assert "runtime/parallel/lifeline.py" in names
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
         tmp_path, env)
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   tmp_path, env).strip()
    Path(purelib, "reuse-pinned-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = _run([str(python), "-c", "import easerve, runtime, sim; "
                  "print(easerve.__file__); print(runtime.__file__); print(sim.__file__)"], work, env)
    assert all(line.startswith(purelib) for line in where.split()), where  # the wheel, not the checkout
    easerve = str(venv / "bin" / "easerve")
    out = _run([easerve, "sim", "llava34b_rtx6000ada.toml", "--out", "sim", "--no-plots"], work, env)
    assert "1000/1000 ok" in out and (work / "sim" / "records.parquet").is_file()
    _run([easerve, "search", "ultravox27b_rtx6000ada.toml", "--rate", "2", "--trials", "2",
          "--trial-s", "5", "--min-requests", "20", "--recheck-top", "1", "--recheck-seeds", "1",
          "--out", "has"], work, env)
    assert (work / "has" / "best.toml").is_file()
