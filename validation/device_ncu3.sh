#!/usr/bin/env bash
# One device call: calibration (L1 request/line rates), Nsight Compute counters for the
# tall-skinny shape, SASS opcode histograms of the GEMMs CuPy compiled.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=validation/results/h200
python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -22
cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/"
timeout 240 python3 -m validation.ncu --out "$R" --shape 16384x256x4096 --no-progress 2>&1 | tail -3
cp "$R/counters.csv" "$OUT/"
find ~/.cupy -type f | head -3; find / -name "*.cubin" -path "*cupy*" 2>/dev/null | head -3
python3 -m validation.sass_histogram "${CUPY_CACHE_DIR:-$HOME/.cupy/kernel_cache}" "$OUT/sass_histogram.json"
