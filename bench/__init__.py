"""Scaling benchmark (issue 3): our Futhark backends against PyTorch CPU eager.

``python -m bench`` (from the repository root, with the venv's python) runs the
sweep and writes CSV files, PNG plots and a table into ``bench/results/``; see
bench/README.md. Modules: ``configs`` (the named sizes), ``datasets`` (names and
tinyshakespeare as token rows), ``torch_ref`` (the PyTorch model), ``worker``
(one measurement in a fresh subprocess), ``sweep`` (running the workers),
``report`` (tables and targets), ``plots``; ``recipe`` (``python -m bench.recipe``:
nanoGPT's shakespeare_char run, ours against ``torch_ref.TorchGPT2``).
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "bench" / "results"
# The data the project ships (data/README.md: names.txt, tinyshakespeare.txt).
DATA_DIR = REPO_ROOT / "data"
