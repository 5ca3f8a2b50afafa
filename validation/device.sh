#!/usr/bin/env bash
# The commands run on the lent H200 (a bare machine without network; simpy travels as a wheel in
# .whl/, named in the call's `carry`, with .device_git_revision, written by
# `git rev-parse HEAD > .device_git_revision` before the call, so that the results record the
# revision the copy came from). Usage: bash validation/device.sh STEP [STEP ...], steps:
#   families:F1,F2,..  for each family: the suite checked and timed (validation.harness.suite, resumable,
#                    a broken kernel recorded with its status), then Nsight Compute counters of every
#                    configuration timed ok (validation.harness.ncu, one ncu process per 64 configs);
#                    into validation/results/<gpu>/<family>/ (times.csv, counters.csv, metadata.json),
#                    copied to $OUT/results/<gpu>/<family>/ (logs: $OUT/suite.log, ncu.log). Bounded by SUITE_TIMEOUT
#                    (default 300 s, all families) and NCU_TIMEOUT (default 200 s); run it again to go on.
#   calibrate        microbenchmarks -> calibration.json and the calibrated profile
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
echo "results under $R"
copy_family() {  # $1 = family: its results and logs to $OUT/results/<gpu>/<family>/
  mkdir -p "$OUT/results/$GPU/$1"
  for f in times.csv counters.csv metadata.json; do
    [ -f "$R/$1/$f" ] && cp "$R/$1/$f" "$OUT/results/$GPU/$1/"
  done
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "revision $(cat .device_git_revision 2>/dev/null || echo unknown)"
for step in "$@"; do
  case "$step" in
    families:*)
      fams=$(echo "${step#families:}" | tr ',' ' ')
      for fam in $fams; do mkdir -p "$R/$fam"; done
      # shellcheck disable=SC2086
      timeout "${SUITE_TIMEOUT:-300}" python3 -m validation.harness.suite $fams --results "$R" 2>&1 | tee -a "$OUT/suite.log"
      # shellcheck disable=SC2086
      timeout "${NCU_TIMEOUT:-200}" python3 -m validation.harness.ncu $fams --results "$R" 2>&1 | tee -a "$OUT/ncu.log"
      for fam in $fams; do copy_family "$fam"; done ;;
    calibrate)
      python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -24
      cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/" ;;
    suite)
      timeout "${SUITE_TIMEOUT:-470}" python3 -m validation.harness.suite gemm --results "$R" 2>&1 | tail -40
      copy_family gemm ;;
    rerun)
      timeout "${SUITE_TIMEOUT:-470}" python3 -m validation.harness.suite gemm --out "$R/gemm/rerun" 2>&1 | tail -10
      mkdir -p "$OUT/results/$GPU/gemm/rerun" && cp "$R/gemm/rerun/times.csv" "$R/gemm/rerun/metadata.json" "$OUT/results/$GPU/gemm/rerun/" ;;
    ncu:*)
      timeout "${NCU_TIMEOUT:-300}" python3 -m validation.harness.ncu gemm --results "$R" --shape "${step#ncu:}" 2>&1 | tail -5
      copy_family gemm ;;
    dispatch)
      python3 -m validation.dispatch_probe --out "$R" 2>&1 | tail -8
      cp "$R/dispatch.json" "$OUT/" ;;
    staging)
      python3 -m validation.staging_probe --out "$R" 2>&1 | tail -8
      cp "$R/staging.json" "$OUT/" ;;
    l2)
      python3 -m validation.l2_probe --out "$R" 2>&1 | tail -20
      cp "$R/l2_probe.json" "$OUT/" ;;
    l2share)
      python3 -m validation.l2_share_probe --out "$R" 2>&1 | tail -12
      cp "$R/l2_share_probe.json" "$OUT/" ;;
    l1spread)
      python3 -m validation.calibrate --out "$R" --l1-spread 2>&1 | tail -5
      cp "$R/l1_spread.json" "$OUT/" ;;
    ldsouter)
      python3 -m validation.calibrate --out "$R" --lds-outer 2>&1 | tail -12
      cp "$R/lds_outer.json" "$OUT/" ;;
    stagedouter)
      python3 -m validation.calibrate --out "$R" --staged-outer 2>&1 | tail -12
      cp "$R/staged_outer.json" "$OUT/" ;;
    loadedlat)
      python3 -m validation.calibrate --out "$R" --loaded-latency 2>&1 | tail -9
      cp "$R/loaded_latency.json" "$OUT/" ;;
    smemrate)
      python3 -m validation.smem_rate_probe --out "$R" 2>&1 | tail -12
      cp "$R/smem_rate.json" "$OUT/" ;;
    trace:*)
      python3 -m validation.schedule_trace --out "$R" --shape "${step#trace:}" 2>&1 | tail -30
      cp "$R/schedule_trace.npz" "$R/schedule_trace.json" "$OUT/" ;;
    gpu-tests)
      python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -30 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
