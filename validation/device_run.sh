#!/usr/bin/env bash
# One device call: calibration microbenchmarks, then the timed GEMM suite (resumable), then copies
# of the harness's outputs into $OUT. Usage on the device: bash validation/device_run.sh [suite args]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=validation/results/h200
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
if [ "${SKIP_CALIBRATION:-0}" != 1 ]; then
  python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -40
  cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/" 2>/dev/null
fi
timeout "${SUITE_TIMEOUT:-470}" python3 -m validation.suite --out "$R" --no-progress "$@" 2>&1 | tail -120
cp "$R/times.csv" "$R/metadata.json" "$OUT/" 2>/dev/null
