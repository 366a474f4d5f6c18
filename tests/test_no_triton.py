"""genolin where triton is not installed (CPU installs leave it out; it is the gpu extra): every module imports
(the kernels' own modules aside), training, prediction and the attention benchmark run on the PyTorch
references, and kernels asked for by name say what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import GUE_TATA, REPO

SCRIPT = r"""
import sys
sys.modules["triton"] = None  # an import of triton now fails, as where it is not installed
import importlib, pkgutil
from pathlib import Path

import genolin
for module in pkgutil.walk_packages(genolin.__path__, "genolin."):
    if not module.name.endswith("_triton"):  # the kernels' modules, imported only where triton is
        importlib.import_module(module.name)

import torch
from click.testing import CliRunner
from genolin.cli import cli
from genolin.inference import load_kernels
from genolin.ops import linear_attention

data, out = Path(sys.argv[1]), Path(sys.argv[2])
def run(*args):
    result = CliRunner().invoke(cli, ["-q", *map(str, args)])
    assert result.exit_code == 0, result.output
run("train", "--csv", data / "dev.csv", "--val-csv", data / "test.csv", "--preset", "tiny", "--device", "cpu",
    "--set", "steps=2", "--set", "epochs=1", "--set", "model.d_model=16", "--out", out / "run")
run("predict", "--model", out / "run", "--csv", data / "test.csv", "--device", "cpu", "--out", out / "p.tsv")
run("bench", "attention", "--n", "32", "--variants", "elu,hybrid", "--heads", "1", "--head-dim", "4",
    "--repeats", "1", "--device", "cpu")
load_kernels()  # a head start that never fails
q = torch.randn(1, 8, 1, 4)
try:
    linear_attention(q, q, q, backend="triton")
    raise AssertionError("the triton backend ran without triton")
except ImportError as exc:
    assert "pip install 'genolin[gpu]'" in str(exc), exc
assert sys.modules["triton"] is None
print("OK")
"""


@pytest.mark.slow  # a fresh interpreter imports every module, trains and predicts: about 10 s
def test_genolin_runs_without_triton(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("dev", "test"):  # 60 rows each: a few seconds of training
        lines = (GUE_TATA / f"{name}.csv").read_text().splitlines()
        (data / f"{name}.csv").write_text("\n".join(lines[:61]) + "\n")
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(data), str(tmp_path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stdout + result.stderr


def test_triton_is_an_extra_that_the_tests_install():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("triton")]  # CPU installs go without
    assert [d for d in project["optional-dependencies"]["gpu"] if d.startswith("triton")]
    assert "genolin[gpu]" in project["optional-dependencies"]["dev"]  # CI runs the kernels' interpreter tests
    assert project["license"] == "MIT" and (REPO / "LICENSE").read_text().startswith("MIT License")
