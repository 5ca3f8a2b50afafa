#!/bin/bash
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
python3 .fid/compile_sass.py "$OUT" > "$OUT/log.txt" 2>&1
ls -la /tmp/cc | head -5 >> "$OUT/log.txt"; head -c 120 $(ls /tmp/cc/* | head -1) | od -c | head -5 >> "$OUT/log.txt"
grep -c "Function :" $OUT/sass_*.txt
