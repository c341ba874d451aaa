#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run of under 8 minutes: every CUDA test
# (pytest -m cuda: the iree-cuda backend, export for CUDA, device-resident tensors on cuda)
# and the CUDA benchmark (benchmarks/bench.py --backend iree-cuda, model and inputs on the GPU,
# then on the host for the per-call transfer figures). Logs go to $OUT (or ./gpu-check).
#
#   bash benchmarks/gpu_check.sh
#
# Needs the package's dependencies (iree-base-compiler, iree-base-runtime, numpy, sympy,
# pytest). Where pip cannot reach an index, put wheels in ./.whl first, or the unpacked
# iree packages as ./.whl/iree.tar.xz (site-packages' iree/ and *.dist-info folders: smaller
# than the compiler's wheel); they are installed from there without network access.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"

if ! "$py" -c "import iree.compiler, iree.runtime" 2>/dev/null; then
  if [ -f .whl/iree.tar.xz ]; then
    mkdir -p /tmp/site && tar -xJf .whl/iree.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site:.
  elif [ -d .whl ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
  else
    "$py" -m pip install -q -e ".[test]" || { echo "gpu_check: cannot install the dependencies" >&2; exit 2; }
  fi
fi
export PYTHONPATH="${PYTHONPATH:-.}"
# the package maps tensorplay.dialects and tensorplay.passes to top-level folders: an
# editable install (offline, no build isolation) makes that mapping
"$py" -c "import tensorplay" 2>/dev/null ||
  "$py" -m pip install -q --no-index --no-deps --no-build-isolation -e . ||
  { echo "gpu_check: cannot install tensorplay itself" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/gpu.txt"
"$py" - <<'EOF' 2>&1 | tee -a "$out/gpu.txt"
import tensorplay.compiler as tpc
caps = tpc.get_backend_capabilities("iree-cuda")
print("iree-cuda available:", caps.available, caps.reason or "", caps.extra)
EOF

status=0
timeout 240 "$py" -m pytest -q -rs -m cuda -p no:cacheprovider tests 2>&1 | tee "$out/cuda-tests.txt" || status=1
timeout 120 "$py" benchmarks/bench.py --backend iree-cuda --repeats 30 --no-torch 2>&1 | tee "$out/bench-cuda.txt" || status=1
timeout 45 "$py" benchmarks/bench.py --backend iree-cuda --device cpu --repeats 10 --no-torch --cases mlp,gpt 2>&1 \
  | tee "$out/bench-cuda-host-tensors.txt" || status=1
# which optimization level the iree-cuda default should be: interleaved rounds, host inputs
timeout 90 "$py" benchmarks/pipelines.py --backend iree-cuda --cases matmul1024,gpt,block,norm --rounds 15 \
  --candidates '{"O0": {"opt_level": "O0"}, "O2": {"opt_level": "O2"}, "O3": {"opt_level": "O3"}}' 2>&1 \
  | tee "$out/pipelines-cuda.txt" || status=1
exit $status
