#!/bin/bash
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
python3 .fid/compile_sass.py "$OUT" > "$OUT/log.txt" 2>&1
ncu --query-metrics --chip gh100 > /tmp/metrics.txt 2>&1
grep -E "wavefronts_mem_shared|shfl|_op_bar|data_pipe_lsu_wavefronts " /tmp/metrics.txt >> "$OUT/log.txt"
X=""
for w in l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom l1tex__data_pipe_lsu_wavefronts_mem_shared_cmd_read l1tex__data_pipe_lsu_wavefronts_mem_shared_cmd_write l1tex__data_pipe_lsu_wavefronts smsp__inst_executed_op_shfl smsp__sass_inst_executed_op_shfl l1tex__data_pipe_lsu_wavefronts_mem_shared_op_shfl; do grep -q "^$w " /tmp/metrics.txt && X="$X,$w.sum"; done
M="sass__inst_executed_per_opcode,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum$X"
echo "metrics: $M" >> "$OUT/log.txt"
for fam in softmax layernorm; do
  python3 .fid/jobs.py $fam /tmp/jobs_$fam.json
  timeout ${BUDGET:-150} ncu --clock-control none --cache-control all --target-processes all --csv --page raw \
    --print-units base --print-kernel-base mangled --profile-from-start off --print-metric-instances details \
    --metrics "$M" python3 -m validation.harness.ncu --target $fam --jobs /tmp/jobs_$fam.json \
    --manifest /tmp/man_$fam.jsonl > "$OUT/ops_$fam.csv" 2> /tmp/ops_$fam.err
  echo "$fam rc $?" >> "$OUT/log.txt"; tail -5 /tmp/ops_$fam.err >> "$OUT/log.txt"
  cp /tmp/man_$fam.jsonl "$OUT/man_$fam.jsonl"
done
