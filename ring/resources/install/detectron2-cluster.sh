#!/usr/bin/env bash
# The detection stage's environment on a cluster (Table 4): Detectron2 built from its git repository
# at a pinned commit, with its C++/CUDA extension, into the environment of envs/ring-bench.yaml.
#
#   conda activate ring-bench && ring install-detection --cluster     # or: bash ring/resources/install/detectron2-cluster.sh
#
# Run it where the GPU nodes' CUDA toolkit is visible (a GPU node, or a login node with CUDA_HOME set
# and TORCH_CUDA_ARCH_LIST naming your GPUs, e.g. "8.0;9.0"): the extension is compiled against the
# installed torch.  Machines without access to the repository use detectron2-cpu.sh (`ring install-detection`).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${1:-${PYTHON:-python}}
PINS=(-r "$HERE/../requirements-detection.txt")
[ -f "$HERE/../../../envs/constraints-cpu.txt" ] && PINS+=(-c "$HERE/../../../envs/constraints-cpu.txt")
# facebookresearch/detectron2 main at the time ring-bench pinned it; its Python code is v0.6's plus
# the NumPy/Pillow fixes that detectron2-cpu.sh applies to the CPU install.
DETECTRON2_COMMIT=3ed610f0e0eca9f5205ea2b299142c8ca74d8f35
"$PY" -m pip install "${PINS[@]}"
"$PY" -m pip install --no-build-isolation "detectron2 @ git+https://github.com/facebookresearch/detectron2.git@${DETECTRON2_COMMIT}"
"$PY" -c "from detectron2 import _C; import detectron2; print('detectron2', detectron2.__version__, 'with its C++/CUDA extension')"
