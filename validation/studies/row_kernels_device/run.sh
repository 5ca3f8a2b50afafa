#!/bin/bash
# device: SASS of the measured kernels, and per-opcode executed counts + shared-memory wavefront split
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
python3 .fid/compile_sass.py "$OUT" 2>&1 | tee "$OUT/log.txt"
ncu --query-metrics --chip gh100 > /tmp/metrics.txt 2>&1
WANT="smsp__sass_inst_executed_op_shared_ld.sum smsp__sass_inst_executed_op_shared_st.sum l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum l1tex__data_pipe_lsu_wavefronts_mem_shared.sum smsp__inst_executed_op_shfl.sum smsp__sass_inst_executed_op_global_ld.sum l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum l1tex__m_xbar2l1tex_read_sectors.sum smsp__inst_executed.sum"
M=""
for w in $WANT; do b=${w%.sum}; if grep -q "^$b " /tmp/metrics.txt; then M="$M,$w"; else echo "missing $w" | tee -a "$OUT/log.txt"; fi; done
M=${M#,}
python3 .fid/jobs.py softmax /tmp/jobs_probe.json >/dev/null && python3 -c "import json;j=json.load(open('/tmp/jobs_probe.json'));json.dump(j[:1],open('/tmp/jobs_probe.json','w'))"
if timeout 60 ncu --clock-control none --target-processes all --csv --page raw --profile-from-start off --print-metric-instances values --metrics sass__inst_executed_per_opcode python3 -m validation.harness.ncu --target softmax --jobs /tmp/jobs_probe.json --manifest /tmp/mp.jsonl > /tmp/probe.csv 2>&1; then M="sass__inst_executed_per_opcode,$M"; else echo "opcode metric failed" >> "$OUT/log.txt"; fi
tail -5 /tmp/probe.csv >> "$OUT/log.txt"
echo "metrics: $M" | tee -a "$OUT/log.txt"
for fam in softmax layernorm; do
  python3 .fid/jobs.py $fam /tmp/jobs_$fam.json
  rm -f /tmp/man_$fam.jsonl
  timeout ${BUDGET:-200} ncu --clock-control none --cache-control all --target-processes all --csv --page raw \
    --print-units base --print-kernel-base mangled --profile-from-start off --print-metric-instances values \
    --metrics "$M" python3 -m validation.harness.ncu --target $fam --jobs /tmp/jobs_$fam.json \
    --manifest /tmp/man_$fam.jsonl > "$OUT/ops_$fam.csv" 2> /tmp/ops_$fam.err
  echo "$fam rc $?" | tee -a "$OUT/log.txt"; tail -20 /tmp/ops_$fam.err >> "$OUT/log.txt"
  cp /tmp/man_$fam.jsonl "$OUT/man_$fam.jsonl"
done
