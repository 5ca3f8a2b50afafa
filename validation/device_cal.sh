#!/usr/bin/env bash
# One device call: the calibration microbenchmarks only (writes calibration.json and the profile).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=validation/results/h200
python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -24
cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/"
python3 -c "import json; d=json.load(open('$R/calibration.json')); print({k: round(v['value'],3) for k,v in d['benchmarks']['icache'].get('rows',{}).items()}, d['benchmarks']['icache'].get('error'))"
