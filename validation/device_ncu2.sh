#!/usr/bin/env bash
# One device call: calibration (component-using L1/shared loads), Nsight Compute counters for
# the 1024^3 and 3000x2000x1000 shapes, and SASS opcode histograms of the compiled GEMMs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=validation/results/h200
python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -16
cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/"
timeout 200 python3 -m validation.ncu --out "$R" --shape 1024x1024x1024 --no-progress 2>&1 | tail -3
timeout 200 python3 -m validation.ncu --out "$R" --shape 3000x2000x1000 --no-progress 2>&1 | tail -3
cp "$R/counters.csv" "$OUT/"
python3 -m validation.sass_histogram ~/.cupy/kernel_cache "$OUT/sass_histogram.json"
