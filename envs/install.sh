#!/usr/bin/env bash
# Creates (or updates) .venv at the repository root with ring-bench and its pinned requirements.
# Idempotent: a second run only checks the pins.  Needs Python >= 3.10 and pip access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -r envs/requirements-cpu.txt -c envs/constraints-cpu.txt -e .
# NVIDIA DALI (augment: dali, ring/data/dali.py): a separate pinned file, so that the shared pins above stay the
# constraints it resolves under; 199 MB from PyPI, Linux wheels only.  RING_SKIP_DALI=1 leaves it out
# (the dali tests then skip and augment: dali says what to install).
if [ "${RING_SKIP_DALI:-0}" != 1 ] && [ "$(uname -s)" = Linux ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -r envs/requirements-dali.txt -c envs/constraints-cpu.txt
fi
# Detectron2 for the detection stage (Table 4): its Python code from a pinned, hash-checked sdist
# (this machine and CI reach PyPI, not GitHub); clusters use `ring install-detection --cluster` instead.
bash ring/resources/install/detectron2-cpu.sh .venv/bin/python
