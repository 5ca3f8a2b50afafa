set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
python3 -m validation.studies.tc_step_parts --shape 4096x4096x4096 --out $OUT/parts
python3 -m validation.studies.tc_step_parts --shape 8192x8192x8192 --out $OUT/parts
python3 -m validation.studies.tc_step_parts --shape 3001x4000x2008 --labels wgmma_fp16_Bcol_128x256x64_swz_s4_c2,wgmma_fp16_Bcol_128x256x64_swz_s4_c2_cl2 --out $OUT/parts
ls -la $OUT/parts
