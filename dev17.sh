set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
L=mma_fp16_Bcol_128x256x32_w64x64_swz_s4,mma_fp16_Bcol_128x128x32_w64x64_swz_s3,mma_fp16_Bcol_128x128x32_w64x32_swz_s4,mma_fp16_Bcol_128x128x32_w64x64_pad_s3,wmma_fp16_Bcol_128x128x32_w64x32_pad_s3,mma_fp16_Bcol_128x128x32_w64x64_dense_s3
python3 -m validation.studies.tc_step_parts --shape 8192x8192x8192 --labels $L,mma_tf32_Bcol_128x128x32_w64x64_swz_s3 --out $OUT/mparts
python3 -m validation.studies.tc_step_parts --shape 4096x4096x4096 --labels $L --out $OUT/mparts
ls -la $OUT/mparts
