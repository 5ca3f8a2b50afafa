#!/usr/bin/env bash
# The commands run on the lent H200 (a bare machine without network; simpy travels as a wheel in
# .whl/, named in the call's `carry`, with .device_git_revision, written by
# `git rev-parse HEAD > .device_git_revision` before the call, so that the results record the
# revision the copy came from). Usage: bash validation/device.sh STEP [STEP ...], steps:
#   families:F1,F2,..  for each family: the suite checked and timed (validation.harness.suite, resumable,
#                    a broken kernel recorded with its status), then Nsight Compute counters of every
#                    configuration timed ok (validation.harness.ncu, one ncu process per 32 configs);
#                    written to $OUT/results/<gpu>/<family>/ (times.csv, counters.csv, metadata.json),
#                    starting from the tree's validation/results/<gpu>/<family>/ (copy them back there to
#                    resume in the next call; logs: $OUT/suite.log, ncu.log). Bounded by SUITE_TIMEOUT
#                    (default 300 s, all families) and NCU_TIMEOUT (default 200 s); run it again to go on.
#                    A kernel still running after 120 s is recorded as launch_error and the suite restarts.
#   calibrate        microbenchmarks -> calibration/calibration.json and tilesim/hardware/calibrated/<gpu>.toml
#                    (dispatch, staging, l2, l1spread, ldsouter, stagedouter, loadedlat: calibration/ too;
#                    l2share, smemrate, trace: results/<gpu>/studies/<study>/)
#   suite            the timed GEMM suite (families:gemm without ncu)
#   rerun            the whole GEMM suite measured again into results/<gpu>/gemm/rerun (reproducibility)
#   ncu:MxNxK        Nsight Compute counters for one shape of the GEMM suite (resumable)
#   gpu-tests        pytest -m gpu, with its log
#   dispatch         where the block scheduler puts a last partial wave (dispatch.json)
#   staging          shared-memory wavefronts of cp.async and register staging (staging.json, ncu)
#   l2               how much data read from all over the chip the L2 holds (l2_probe.json, ncu)
#   l2share          L2 capacity for data many SMs read at once / at a 16 KiB pitch (l2_share_probe.json)
#   l1spread         the L1's lines per clock for lanes spread over sector positions (l1_spread.json)
#   ldsouter         issue rate of outer products fed from shared memory, 4-16 warps (lds_outer.json)
#   stagedouter      the same with a non-pipelined k-step's staging, R blocks per SM (staged_outer.json)
#   loadedlat        DRAM latency of a pointer chase under background reads (loaded_latency.json)
#   smemrate         wavefronts and shared instructions per clock for each access kind (smem_rate.json)
#   trace:MxNxK      per-block schedule of the suite's staged kernels (schedule_trace.npz/.json)
# Outputs are copied to $OUT (the device tool brings them back) as they are produced.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
GPU=$(python3 -c "from validation.harness.metadata import current_gpu_slug; print(current_gpu_slug() or 'unknown_gpu')")
R=validation/results/$GPU
mkdir -p "$R"
C=$R/calibration S=$R/studies
echo "results under $R"
copy_family() {  # $1 = family: its results and logs to $OUT/results/<gpu>/<family>/
  mkdir -p "$OUT/results/$GPU/$1"
  for f in times.csv counters.csv metadata.json; do
    [ -f "$R/$1/$f" ] && cp "$R/$1/$f" "$OUT/results/$GPU/$1/"
  done
}
copy_dir() {  # $1 = a directory under the results dir, then files: copied to $OUT/results/<gpu>/$1/
  local d=$1; shift
  mkdir -p "$OUT/results/$GPU/$d" && cp "$@" "$OUT/results/$GPU/$d/"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "revision $(cat .device_git_revision 2>/dev/null || echo unknown)"
for step in "$@"; do
  case "$step" in
    families:*)
      # results are written straight under $OUT (so that whatever is measured comes back, even if the
      # call is cut), starting from the rows already recorded in the tree (so that it resumes)
      fams=$(echo "${step#families:}" | tr ',' ' ')
      W="$OUT/results/$GPU"
      for fam in $fams; do
        mkdir -p "$W/$fam"
        if [ -d "$R/$fam" ]; then cp -r "$R/$fam/." "$W/$fam/"; fi
      done
      # the suite exits 75 after recording a hung kernel: start it again (it resumes) while time is left
      end=$((SECONDS + ${SUITE_TIMEOUT:-300}))
      while [ $((end - SECONDS)) -gt 5 ]; do
        # shellcheck disable=SC2086
        timeout $((end - SECONDS + 15)) python3 -m validation.harness.suite $fams --results "$W" \
          --budget-s $((end - SECONDS)) 2>&1 | tee -a "$OUT/suite.log"
        [ "${PIPESTATUS[0]}" -eq 75 ] || break
      done
      # shellcheck disable=SC2086
      timeout $((${NCU_TIMEOUT:-200} + 15)) python3 -m validation.harness.ncu $fams --results "$W" \
        --budget-s "${NCU_TIMEOUT:-200}" 2>&1 | tee -a "$OUT/ncu.log" ;;
    calibrate)
      python3 -m validation.calibration.calibrate --out "$C" 2>&1 | tail -24
      copy_dir calibration "$C/calibration.json"; cp tilesim/hardware/calibrated/"$GPU".toml "$OUT/" ;;
    dispatch)
      python3 -m validation.calibration.dispatch_probe --out "$C" 2>&1 | tail -8
      copy_dir calibration "$C/dispatch.json" ;;
    staging)
      python3 -m validation.calibration.staging_probe --out "$C" 2>&1 | tail -8
      copy_dir calibration "$C/staging.json" ;;
    l2)
      python3 -m validation.calibration.l2_probe --out "$C" 2>&1 | tail -20
      copy_dir calibration "$C/l2_probe.json" ;;
    l1spread)
      python3 -m validation.calibration.calibrate --out "$C" --l1-spread 2>&1 | tail -5
      copy_dir calibration "$C/l1_spread.json" ;;
    ldsouter)
      python3 -m validation.calibration.calibrate --out "$C" --lds-outer 2>&1 | tail -12
      copy_dir calibration "$C/lds_outer.json" ;;
    stagedouter)
      python3 -m validation.calibration.calibrate --out "$C" --staged-outer 2>&1 | tail -12
      copy_dir calibration "$C/staged_outer.json" ;;
    loadedlat)
      python3 -m validation.calibration.calibrate --out "$C" --loaded-latency 2>&1 | tail -9
      copy_dir calibration "$C/loaded_latency.json" ;;
    l2share)
      python3 -m validation.studies.l2_share_probe --out "$S/l2_share_probe" 2>&1 | tail -12
      copy_dir studies/l2_share_probe "$S/l2_share_probe/l2_share_probe.json" ;;
    smemrate)
      python3 -m validation.studies.smem_rate_probe --out "$S/smem_rate_probe" 2>&1 | tail -12
      copy_dir studies/smem_rate_probe "$S/smem_rate_probe/smem_rate.json" ;;
    trace:*)
      python3 -m validation.studies.schedule_trace --out "$S/schedule_trace" --shape "${step#trace:}" 2>&1 | tail -30
      copy_dir studies/schedule_trace "$S/schedule_trace/schedule_trace.npz" "$S/schedule_trace/schedule_trace.json" ;;
    gpu-tests)
      python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -30 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
