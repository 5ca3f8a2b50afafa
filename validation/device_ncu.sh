#!/usr/bin/env bash
# One device call: calibration again (fixed L1/shared benchmarks), then Nsight Compute counters for
# the suite at 4096^3 and for the naive kernels at every shape. Outputs copied to $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=validation/results/h200
mkdir -p "$R"
python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -20
cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/"
nvcc -arch=sm_90 -cubin -o /tmp/mb.cubin validation/kernels/microbench.cu && for f in read_l1 read_smem read_l1_scatter fma_outer fma_chains; do
  echo "$f: LDG $(cuobjdump -sass -fun $f /tmp/mb.cubin | grep -c LDG) LDS $(cuobjdump -sass -fun $f /tmp/mb.cubin | grep -c LDS) FFMA $(cuobjdump -sass -fun $f /tmp/mb.cubin | grep -c FFMA)"; done | tee "$OUT/microbench_sass_counts.txt"
python3 -m validation.ncu --out /tmp/ncu_probe --shape 1024x1024x1024 --limit 1 --no-progress 2>&1 | tail -3
if ! grep -q ',ok,' /tmp/ncu_probe/counters.csv 2>/dev/null; then echo "extra metrics rejected: base metrics only"; export TILESIM_NCU_EXTRA=0; fi
timeout "${NCU_TIMEOUT_A:-330}" python3 -m validation.ncu --out "$R" --shape 4096x4096x4096 --no-progress 2>&1 | tail -5
timeout "${NCU_TIMEOUT_B:-100}" python3 -m validation.ncu --out "$R" --only naive --no-progress 2>&1 | tail -5
cp "$R/counters.csv" "$OUT/"
