#!/usr/bin/env bash
# The commands run on the lent H200 (a bare machine without network; simpy travels as a wheel in
# .whl/, named in the call's `carry`, with .device_git_revision, written by
# `git rev-parse HEAD > .device_git_revision` before the call, so that the results record the
# revision the copy came from). Usage: bash validation/device.sh STEP [STEP ...], steps:
#   calibrate        microbenchmarks -> calibration.json and the calibrated profile
#   suite            the timed GEMM suite (resumable; bounded so its rows always come back)
#   rerun            the whole suite measured again into results/h200/rerun (reproducibility)
#   ncu:MxNxK        Nsight Compute counters for one shape of the suite (resumable)
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
R=validation/results/h200
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "revision $(cat .device_git_revision 2>/dev/null || echo unknown)"
for step in "$@"; do
  case "$step" in
    calibrate)
      python3 -m validation.calibrate --out "$R" --profile tilesim/hardware/calibrated/h200.toml 2>&1 | tail -24
      cp "$R/calibration.json" tilesim/hardware/calibrated/h200.toml "$OUT/" ;;
    suite)
      timeout "${SUITE_TIMEOUT:-470}" python3 -m validation.suite --out "$R" --no-progress 2>&1 | tail -40
      cp "$R/times.csv" "$R/metadata.json" "$OUT/" ;;
    rerun)
      timeout "${SUITE_TIMEOUT:-470}" python3 -m validation.suite --out "$R/rerun" --no-progress 2>&1 | tail -10
      mkdir -p "$OUT/rerun" && cp "$R/rerun/times.csv" "$R/rerun/metadata.json" "$OUT/rerun/" ;;
    ncu:*)
      timeout "${NCU_TIMEOUT:-300}" python3 -m validation.ncu --out "$R" --shape "${step#ncu:}" --no-progress 2>&1 | tail -5
      cp "$R/counters.csv" "$OUT/" ;;
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
