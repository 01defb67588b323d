#!/usr/bin/env bash
# Detectron2's Python package, without its C++/CUDA extension, for CPU machines that reach PyPI but
# not GitHub (this project's development machines and CI).  Usage: `ring install-detection` (this interpreter), or
# bash ring/resources/install/detectron2-cpu.sh VENV_PYTHON (envs/install.sh)
#
# Why not `pip install detectron2`: detectron2 is not published as a wheel, and the two source
# distributions on PyPI (pb1-detectron2 0.6, detectron2-cdo 0.5) lack detectron2/layers/csrc, so
# their setup.py fails.  Their Python code is detectron2 v0.6 as released.  ring.detection only
# uses parts that do not need the extension: ROIAlign and NMS come from torchvision, deformable
# convolutions are never built, and the COCO evaluator runs with use_fast_impl=False (pycocotools).
# So this script downloads the pinned sdist (hash checked), packages its `detectron2/` folder,
# model-zoo configs included, as a pure-Python `detectron2==0.6` and installs it with its runtime
# requirements from ring/resources/requirements-detection.txt.  Two documented changes to the sources: the
# NumPy/Pillow alias replacements upstream made after v0.6, and a `detectron2/_C.py` that fails
# with one sentence if an operator of the missing extension is ever called.  A cluster uses detectron2-cluster.sh instead
# (`ring install-detection --cluster`)
# (detectron2 built from its git repository at a pinned commit, with the extension).
# Shipped in the package (ring/resources/install/), so that a wheel's user runs it too.
# Idempotent: nothing is downloaded when detectron2 0.6 is already installed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${1:-python}
# The requirements' pins, and in a checkout the shared constraints their dependencies resolve under (a wheel has none).
PINS=(-r "$HERE/../requirements-detection.txt")
[ -f "$HERE/../../../envs/constraints-cpu.txt" ] && PINS+=(-c "$HERE/../../../envs/constraints-cpu.txt")
SDIST=pb1-detectron2-0.6.tar.gz
SDIST_SHA256="5d2e9e51e523ec72f6a31cca04b0a515492e9514b773a3d134cedc0677170b29"

"$PY" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('detectron2') != '0.6')" 2>/dev/null; then
    exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" - "$SDIST" "$SDIST_SHA256" "$WORK" <<'PY'
import hashlib, os, re, sys, tarfile, urllib.parse, urllib.request
from pathlib import Path

filename, sha256, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
# The sdist is fetched from the package index pip uses ($PIP_INDEX_URL, else pip's default), found
# on its simple page by file name: `pip download` refuses this sdist (its metadata declares a
# direct-URL extra), and the pinned hash decides whether it is the file ring-bench was tested with.
from pip._internal.models.index import PyPI

index = os.environ.get("PIP_INDEX_URL") or PyPI.simple_url
page_url = f"{index.rstrip('/')}/pb1-detectron2/"
page = urllib.request.urlopen(page_url, timeout=120).read().decode()
links = [urllib.parse.urljoin(page_url, href) for href in re.findall(r'href="([^"]+)"', page)]
url = next((link for link in links if link.split("#")[0].endswith("/" + filename)), None)
if url is None:
    sys.exit(f"{filename} is not listed on {page_url}; is the package index reachable?")
data = urllib.request.urlopen(url.split("#")[0], timeout=300).read()
if hashlib.sha256(data).hexdigest() != sha256:
    sys.exit(f"{filename} from {page_url} does not have the pinned sha256 {sha256}; refusing to install it.")
archive = work / "sdist.tar.gz"
archive.write_bytes(data)
with tarfile.open(archive) as tar:
    tar.extractall(work, filter="data")
src = work / "pb1-detectron2-0.6"
# Only the detectron2 package: its setup.py (which compiles the missing extension) is not used.
(src / "pyproject.toml").write_text('''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "detectron2"
version = "0.6"
description = "Detectron2 v0.6 Python code (from the pb1-detectron2 0.6 sdist), without the C++/CUDA extension"
license = {text = "Apache-2.0"}

[tool.setuptools.packages.find]
include = ["detectron2*"]

[tool.setuptools.package-data]
"detectron2.model_zoo" = ["configs/**/*.yaml", "configs/**/*.py"]
''')
# detectron2 imports its extension at module level in four files (deform_conv, rotated_boxes,
# roi_align_rotated, fast_eval_api) although only those operators use it.  In its place goes a
# module that imports fine and fails with one sentence the moment any of its operators is called.
(src / "detectron2" / "_C.py").write_text('''"""Placeholder for detectron2's C++/CUDA extension, which this CPU install does not build."""


# What detectron2.utils.collect_env (run by default_setup) asks the extension about itself.
def get_compiler_version():
    return "none: detectron2's C++ extension is not built (ring install-detection)"


def get_cuda_version():
    return "none"


def has_cuda():
    return False


def __getattr__(name):
    raise ImportError(
        f"detectron2._C.{name} is part of detectron2's C++ extension, which this CPU install "
        "(ring install-detection) does not build; install detectron2 from its git repository "
        "(ring install-detection --cluster) to use deformable convolutions, rotated boxes or the fast COCO evaluator."
    )
''')
# Detectron2 v0.6 predates NumPy 1.24 and Pillow 10, which removed the aliases np.bool/np.int/
# np.float/np.str and Image.LINEAR; upstream later replaced them by the builtins and
# Image.BILINEAR (the same values).  The same mechanical replacement is applied here.
alias = re.compile(r"\bnp\.(bool|int|float|str|object)\b(?![_\w])")
for path in (src / "detectron2").rglob("*.py"):
    text = path.read_text()
    fixed = alias.sub(r"\1", text).replace("Image.LINEAR", "Image.BILINEAR")
    if fixed != text:
        path.write_text(fixed)
(src / "setup.py").unlink()
(src / "setup.cfg").unlink(missing_ok=True)
PY
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps "$WORK/pb1-detectron2-0.6"
"$PY" -c "import detectron2, detectron2.modeling; print('detectron2', detectron2.__version__, 'installed (Python code only) from the pinned sdist')"
