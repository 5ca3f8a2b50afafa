#!/usr/bin/env bash
# One device call: the GPU test suite (pytest -m gpu), its log kept under $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
echo "revision $(cat .device_git_revision 2>/dev/null)"
python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
