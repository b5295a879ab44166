#!/usr/bin/env bash
# The GPU machine's steps: one shell function a step, each called with the bundle
# folder and a log folder; scripts/gpu-run-all.sh runs them by name regex (the
# table STEPS below: name, time limit in seconds, old names it also answers to).
#   bash scripts/gpu/steps.sh STEP BUNDLE LOGDIR [options passed on]   one step by hand
#   bash scripts/gpu/steps.sh --list                                   the table
#   bash scripts/gpu/steps.sh --unpack BUNDLE     restores the bundle's compressed files
#   source scripts/gpu/steps.sh && mpi_env gpu-bundle && $ENCGRAPH_MPIRUN -np 2 ...
# Python drivers do the work where Python can: bench.py (benchmarks), compare.py
# (against transformers), ncu_profile.py (Nsight Compute), mp_check.py. The *_ARGS
# variables add options when a step runs through gpu-run-all.sh, e.g.
#   QWEN_BENCH_ARGS="--only 224,mixed --skip-transformers" bash scripts/gpu-run-all.sh bench_qwen2_5_vl
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

# name  limit  old names (comma-separated)  [manual: only when asked for by name]
STEPS="
kernels             300 -
manager_bench       300 -
cli_smoke           300 -
verify              400 -
cpu_bench           300 -
bench_qwen2_5_vl    570 qwen_bench
bench_qwen3_vl      570 qwen3_bench
bench_glm4v         570 -
bench_dsocr2        540 dsocr2_bench
bench_siglip        300 siglip_vs_transformers,siglip_bench
bench_internvl      570 internvl_bench
bench_llava_onevision 570 -
bench_capture       300 capture_bench
bench_dp            500 dp_bench
bench_serve         540 serve_bench
compare_qwen2_5_vl  300 qwen_vs_transformers
compare_qwen3_vl    540 qwen3_vs_transformers
compare_glm4v       540 glm4v_vs_transformers
compare_siglip      300 siglip_vs_transformers
compare_dsocr2      540 dsocr2_vs_transformers
compare_internvl    540 internvl_vs_transformers
compare_llava_onevision 540 -
compare_folder_media 600 folder_media_vs_transformers
fp8                 570 -
profile_qwen2_5_vl  400 qwen_profile
profile_qwen3_vl    400 qwen3_profile
profile_dsocr2      400 dsocr2_profile
profile_attention   420 attention_profile
power_qwen          300 qwen_power
power_siglip        300 siglip_power
mp_check            540 -
probe_staging       300 staging_probe manual
"

# --- helpers ----------------------------------------------------------------------------

# mpi_env BUNDLE: unpacks the Open MPI runtime scripts/gpu-bundle-mpi.sh packed (once) and
# sets the environment that relocates it, then ENCGRAPH_MPIRUN to the mpirun command line
# to use (without -np). With Open MPI installed system-wide, that one is used instead.
mpi_env() {
  _eg_bundle=$(cd "${1:-gpu-bundle}" && pwd)
  if command -v mpirun >/dev/null 2>&1 && [[ ! -f $_eg_bundle/mpi.tar.xz ]]; then
    ENCGRAPH_MPIRUN="mpirun --allow-run-as-root --oversubscribe"
  else
    if [[ ! -x $_eg_bundle/mpi/usr/bin/orterun ]]; then
      tar -C "$_eg_bundle" -xJf "$_eg_bundle/mpi.tar.xz"
    fi
    _eg_usr=$_eg_bundle/mpi/usr
    _eg_arch=x86_64-linux-gnu
    export OPAL_PREFIX=$_eg_usr  # Open MPI finds its components, help and orted here
    export PMIX_INSTALL_PREFIX=$_eg_usr/lib/$_eg_arch/pmix2
    export PATH=$_eg_usr/bin:$PATH
    export LD_LIBRARY_PATH=$_eg_usr/lib/$_eg_arch:$_eg_usr/lib/$_eg_arch/openmpi/lib:$_eg_usr/lib/$_eg_arch/pmix2/lib:${LD_LIBRARY_PATH:-}
    # Shared memory and TCP only (the bundle leaves UCX and libfabric out), and
    # quiet about the components that therefore cannot load.
    export OMPI_MCA_pml=ob1
    export OMPI_MCA_btl=self,vader,tcp
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_mca_base_component_show_load_errors=0
    export OMPI_MCA_osc=^ucx
    export PMIX_MCA_pcompress_base_silence_warning=1
    # Root in a container: Open MPI refuses root unless told.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    ENCGRAPH_MPIRUN="$_eg_usr/bin/mpirun --oversubscribe -x LD_LIBRARY_PATH -x OPAL_PREFIX -x PMIX_INSTALL_PREFIX -x PMIX_MCA_pcompress_base_silence_warning -x ENCGRAPH_PLUGIN_PATH -x XDG_CACHE_HOME -x NCCL_NVLS_ENABLE -x PATH"
  fi
  export ENCGRAPH_MPIRUN
  export ENCGRAPH_MPIRUN
}

# power_sample LOGDIR NAME COMMAND...: runs a benchmark while nvidia-smi samples power, SM
# clock, temperature and the active clock-throttle reasons every 100 ms, and summarises the
# samples under load (> 400 W): p10 / p50 / p90 by power, and how often each throttle reason
# was set (0x4: software power cap, 0x1: idle). Leaves LOGDIR/NAME_smi.csv (samples),
# NAME_bench.log (the command's output) and NAME.table (the summary, also printed);
# returns the command's status. POWER_SAMPLE_GPU: the GPU sampled (default 0).
power_sample() (
  set +e
  logdir=$1
  name=$2
  shift 2
  samples=$logdir/${name}_smi.csv
  gpu=${POWER_SAMPLE_GPU:-0}  # the GPU sampled (the benchmark's, device 0 by default)
  : >"$samples"                # exists even if the command ends before the first sample
  nvidia-smi -i "$gpu" --query-gpu=power.draw,clocks.sm,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 100 >"$samples" &
  smi=$!
  "$@" >"$logdir/${name}_bench.log" 2>&1
  rc=$?
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  {
    echo "$name: command exit $rc; power limit $(nvidia-smi -i "$gpu" --query-gpu=power.limit --format=csv,noheader)"
    echo "samples over 400 W: $(awk -F', ' '$1 > 400' "$samples" | wc -l) of $(wc -l <"$samples")"
    echo "p10 / p50 / p90 by power (power W, SM MHz, temperature C, throttle reasons):"
    awk -F', ' '$1 > 400' "$samples" | sort -t, -k1 -n |
      awk '{row[NR] = $0} END { if (NR == 0) { print "none"; exit }
        print row[int(NR * 0.1) + 1]; print row[int(NR * 0.5) + 1]; print row[int(NR * 0.9) + 1] }'
    echo "SM clock p50 under load: $(awk -F', ' '$1 > 400 {print $2}' "$samples" | sort -n |
      awk '{v[NR] = $1} END { print (NR ? v[int(NR * 0.5) + 1] : "none") }') MHz"
    echo "throttle reasons under load (count):"
    awk -F', ' '$1 > 400 {print $4}' "$samples" | sort | uniq -c
    echo "max SM clock: $(nvidia-smi -i "$gpu" --query-gpu=clocks.max.sm --format=csv,noheader)"
  } >"$logdir/$name.table"
  cat "$logdir/$name.table"
  return "$rc"
)

# --- steps: STEP BUNDLE LOGDIR [options] ------------------------------------------------

# The shared CUDA kernels at Qwen2.5-VL-7B shapes (bench_kernels; KERNELS_ARGS: e.g.
# "--only attn"), the table in LOGDIR/kernels.table.
kernels() {
  # shellcheck disable=SC2086
  "$1/bin/bench_kernels" --table "$2/kernels.table" ${KERNELS_ARGS:-} "${@:3}"
}

# FP8 linears (docs/precision.md): the products against bf16, the Qwen2.5-VL tower with
# precision = "fp8_linear" beside bf16 (mixed and 1344), its error against transformers.
fp8() {
  mkdir -p "$2"
  "$1/bin/bench_kernels" --only fp8 --table "$2/fp8_kernels.table" || return 1
  python3 "$here/bench.py" --model qwen2_5_vl --bundle "$1" --out-dir "$2" --skip-transformers \
    --only mixed,1344 --variant "fp8_linear:plugin.config.precision='fp8_linear'" || return 1
  compare_model qwen2_5_vl "$1" "$2" --init hf --precision fp8_linear
}

# The graph manager's host overhead per batch (toy plugin).
manager_bench() {
  "$1/bin/bench_manager_overhead" cuda "$2/manager.table"
}

# The encgraph command on the GPU as a user runs it: the plugin probe (`encgraph
# plugins`), the Qwen2.5-VL and SigLIP configs on a small workload, encode of one PNG,
# and a bad input still exiting 2.
cli_smoke() (
  set -euo pipefail
  bundle=$1
  logdir=$2
  exe=$bundle/bin/encgraph
  work=$(mktemp -d /tmp/encgraph-cli-smoke.XXXX)
  python3 - "$work/a.png" <<'PY'
import struct, sys, zlib
w, h = 448, 336
rows = b"".join(b"\0" + bytes(((x * 7 + y * 13 + c * 50) & 255) for x in range(w) for c in range(3))
                for y in range(h))
chunk = lambda k, d: struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PY
  table=$logdir/cli_smoke.table
  echo "| check | result | seconds |" >"$table"
  echo "|---|---|---|" >>"$table"
  step() {  # step NAME EXPECTED_RC COMMAND...
    local name=$1 want=$2
    shift 2
    local t0=$EPOCHREALTIME rc=0
    "$@" >"$work/$name.log" 2>&1 || rc=$?
    local dt
    dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    cat "$work/$name.log"
    if [[ $rc == "$want" ]]; then
      echo "| $name | ok (exit $rc) | $dt |" >>"$table"
    else
      echo "| $name | FAIL (exit $rc, expected $want) | $dt |" >>"$table"
      failed=1
    fi
  }
  failed=0
  step plugins-probe 0 "$exe" plugins
  step qwen-run 0 "$exe" run -c configs/qwen2_5_vl.toml --set workload.count=16 --set workload.request_size=8
  step siglip-run 0 "$exe" run -c configs/siglip.toml --set workload.count=16 --set workload.request_size=8
  step qwen-encode 0 "$exe" encode -c configs/qwen2_5_vl.toml -o "$work/e.safetensors" "$work/a.png"
  step qwen-encode-onto-input 2 "$exe" encode -c configs/qwen2_5_vl.toml -o "$work/a.png" "$work/a.png"
  step probe-off 0 env ENCGRAPH_PLUGIN_PROBE=0 "$exe" run -c configs/qwen2_5_vl.toml --set workload.count=4
  grep -q "wrote 1 embeddings" "$work/qwen-encode.log" || failed=1
  cat "$table"
  rm -rf "$work"
  exit "$failed"
)

# `encgraph verify` on the shipped GPU configs: every batch through its graph, then every
# item alone, memory poisoned; a row beyond the dtype's tolerance fails the step.
verify() (
  set -euo pipefail
  bundle=$1
  logdir=$2
  exe=$bundle/bin/encgraph
  table=$logdir/verify.table
  echo "| config | result | seconds | summary |" >"$table"
  echo "|---|---|---|---|" >>"$table"
  failed=0
  for cfg in configs/qwen2_5_vl.toml configs/siglip.toml; do
    name=$(basename "$cfg" .toml)
    log=$logdir/verify-$name.log
    t0=$EPOCHREALTIME
    rc=0
    "$exe" verify -c "$cfg" --set workload.count=24 --set workload.request_size=8 >"$log" 2>&1 || rc=$?
    dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    cat "$log"
    line=$(grep -m1 -E '^(OK|MISMATCH|STATISTICS)' "$log" | cut -c1-120 || true)
    if [[ $rc == 0 ]]; then
      echo "| $name | ok | $dt | $line |" >>"$table"
    else
      echo "| $name | FAIL (exit $rc) | $dt | $line |" >>"$table"
      failed=1
    fi
  done
  cat "$table"
  exit $failed
)

# The CPU backend on the GPU machine's host cores: cpu_layer_bench (one Qwen2.5-VL-7B-width
# block against a measured FMA peak, also with OpenBLAS's kernels forced:
# CPU_BENCH_CORETYPES) and the depth-8, 7B-width tower on 7 images, eagerly, timed.
cpu_bench() (
  set -euo pipefail
  bundle=$(cd "$1" && pwd)
  logs=$2
  mkdir -p "$logs"
  lscpu | grep -E "Model name|Flags" | cut -c1-400 | tee "$logs/cpu_lscpu.txt"
  "$bundle/bin/cpu_layer_bench" --patches 1024 --runs 5 | tee "$logs/cpu_layer_bench.txt"
  # OpenBLAS picks its kernels from CPUID; under a VM that may be a weaker set.
  # The same block with the kernels forced (a set the CPU lacks dies: SIGILL).
  for core in ${CPU_BENCH_CORETYPES:-SkylakeX Haswell Zen}; do
    echo "== OPENBLAS_CORETYPE=$core"
    OPENBLAS_CORETYPE=$core "$bundle/bin/cpu_layer_bench" --patches 1024 --runs 3 || true
  done 2>&1 | tee "$logs/cpu_layer_bench_coretypes.txt"
  config=$logs/cpu_depth8.toml
  cat >"$config" <<TOML
[runtime]
device = "cpu"
log_level = "warn"
use_graphs = false
[plugin]
name = "qwen2_5_vl"
weights = "random"
[plugin.config]
depth = 8
fullatt_block_indexes = [7]
dtype = "f32"
max_pixels = 451584
[budgets]
token_budgets = [1024]
max_items_per_batch = 7
[workload]
kind = "synthetic"
count = 7
seed = 1
min_side = 224
max_side = 672
side_multiple = 28
video_fraction = 0.0
request_size = 7
warmup_requests = 0
TOML
  start=$(date +%s.%N)
  "$bundle/bin/encgraph" run -c "$config" | tee "$logs/cpu_depth8.txt"
  end=$(date +%s.%N)
  python3 -c "print(f'depth-8 7B-width tower, 7 images, CPU ({__import__(\"os\").cpu_count()} cores): {$end - $start:.1f} s wall')" |
    tee -a "$logs/cpu_depth8.txt"
  {
    echo "CPU backend on the GPU machine's host"
    tail -3 "$logs/cpu_layer_bench.txt"
    tail -1 "$logs/cpu_depth8.txt"
  } >"$logs/cpu_bench.table"
)

# Benchmarks (bench.py). QWEN_BENCH_ARGS, QWEN3_BENCH_ARGS, GLM4V_BENCH_ARGS,
# DSOCR2_BENCH_ARGS, SIGLIP_BENCH_ARGS, INTERNVL_BENCH_ARGS, LLAVA_BENCH_ARGS,
# CAPTURE_BENCH_ARGS: extra options. The Qwen2.5-VL run with both
# transformers attentions takes about 400 s on an H200; Qwen3-VL's five workloads may
# need two calls (--only 224,mixed, then --only 1344,video,224x1).
bench_model() {  # bench_model MODEL BUNDLE LOGDIR [options]
  mkdir -p "$3"
  python3 "$here/bench.py" --model "$1" --bundle "$2" --out-dir "$3" "${@:4}"
}
# shellcheck disable=SC2086
bench_qwen2_5_vl() { bench_model qwen2_5_vl "$1" "$2" ${QWEN_BENCH_ARGS:-} "${@:3}"; }
# shellcheck disable=SC2086
bench_qwen3_vl() { bench_model qwen3_vl "$1" "$2" ${QWEN3_BENCH_ARGS:-} "${@:3}"; }
# shellcheck disable=SC2086
bench_glm4v() { bench_model glm4v "$1" "$2" ${GLM4V_BENCH_ARGS:-} "${@:3}"; }
# shellcheck disable=SC2086
bench_dsocr2() { bench_model dsocr2 "$1" "$2" ${DSOCR2_BENCH_ARGS:-} "${@:3}"; }
# shellcheck disable=SC2086
bench_siglip() { bench_model siglip "$1" "$2" ${SIGLIP_BENCH_ARGS:-} "${@:3}"; }
# shellcheck disable=SC2086
bench_internvl() { bench_model internvl "$1" "$2" ${INTERNVL_BENCH_ARGS:-} "${@:3}"; }
# shellcheck disable=SC2086
bench_llava_onevision() { bench_model llava_onevision "$1" "$2" ${LLAVA_BENCH_ARGS:-} "${@:3}"; }
# Capture time of the Qwen2.5-VL bench config, cold and warm tuning cache.
# shellcheck disable=SC2086
bench_capture() { bench_model qwen2_5_vl "$1" "$2" --kind capture ${CAPTURE_BENCH_ARGS:-} "${@:3}"; }
# Data parallel against one GPU, one process and one per GPU under mpirun; 77 with one GPU.
bench_dp() { mpi_env "$1" && bench_model qwen2_5_vl "$1" "$2" --kind dp "${@:3}"; }

# Comparisons with transformers (compare.py).
compare_model() {  # compare_model MODEL BUNDLE LOGDIR [options]
  mkdir -p "$3"
  python3 "$here/compare.py" --model "$1" --bundle "$2" --out-dir "$3" "${@:4}"
}
# transformers' initialisation (judged), then the fan-in one where bf16 noise itself is
# near 2e-2 (reported, not judged).
compare_qwen2_5_vl() {
  local rc=0
  compare_model qwen2_5_vl "$1" "$2" --init hf "${@:3}" || rc=$?
  compare_model qwen2_5_vl "$1" "$2" --init fan_in --informational --cpu-items 0 "${@:3}" || rc=$?
  return $rc
}
compare_qwen3_vl() { compare_model qwen3_vl "$@"; }
compare_glm4v() { compare_model glm4v "$@"; }
# The comparison only: bench_siglip times the towers.
compare_siglip() { compare_model siglip "$1" "$2" --no-bench "${@:3}"; }
compare_dsocr2() { compare_model dsocr2 "$@"; }
compare_internvl() { compare_model internvl "$@"; }
compare_llava_onevision() { compare_model llava_onevision "$@"; }
compare_folder_media() { compare_model folder_media "$@"; }

# Per-kernel GPU time under Nsight Compute (ncu_profile.py).
find_ncu() {
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  [[ -n $ncu ]] || { echo "no ncu on this machine"; return 1; }
}
profile_qwen2_5_vl() {
  find_ncu && python3 "$here/ncu_profile.py" --model qwen2_5_vl --bundle "$1" --out-dir "$2" \
    --ncu "$ncu" "${@:3}"
}
# Qwen3-VL-8B at 1344² in bf16, then fp8_linear: where FP8's time goes.
profile_qwen3_vl() {
  find_ncu || return 1
  local p
  for p in bf16 fp8_linear; do
    python3 "$here/ncu_profile.py" --model qwen3_vl --bundle "$1" --out-dir "$2/$p" --ncu "$ncu" \
      --sizes 1344 --set "plugin.config.precision=\"$p\"" "${@:3}" || return 1
  done
}
# DSOCR2_PROFILE_PLUGINS: plugin folders to compare (default: the bundle's).
profile_dsocr2() {
  find_ncu || return 1
  local plugins
  for plugins in ${DSOCR2_PROFILE_PLUGINS:-$1/plugins}; do
    python3 "$here/ncu_profile.py" --model dsocr2 --bundle "$1" --out-dir "$2" --ncu "$ncu" \
      --plugins "$plugins" "${@:3}" || return 1
  done
}
# Nsight Compute on the Hopper attention kernel (head_dim 72 padded to 80) at 768 and 2048
# tokens a sequence (64 sequences x 16 heads), the headline metrics side by side.
profile_attention() (
  set -euo pipefail
  bundle=$1
  logdir=$2
  lengths=(768 2048)
  for len in "${lengths[@]}"; do
    scratch=$(mktemp -d)
    if ! bash "$root/bench/kernels/profile_kernel.sh" "$bundle" "$scratch" \
      'tma_attention_kernel<\(int\)80, \(bool\)1, \(bool\)0, \(int\)0>' --only attnshort --attn-len "$len" \
      >"$logdir/attention_profile_$len.log" 2>&1; then
      # Nsight Compute's own log says why (no counters, no matching launch).
      tail -40 "$scratch"/ncu-run-*.log >>"$logdir/attention_profile_$len.log" 2>&1 || true
      cat "$logdir/attention_profile_$len.log"
      exit 1
    fi
    cp "$scratch"/*-details.txt "$logdir/attention_profile_${len}_details.txt"
    rm -rf "$scratch"
  done
  metrics=("Duration" "SM Frequency" "Compute (SM) Throughput" "Memory Throughput"
    "Executed Ipc Active" "Issue Slots Busy" "No Eligible" "Active Warps Per Scheduler"
    "Eligible Warps Per Scheduler" "Warp Cycles Per Issued Instruction" "Achieved Occupancy"
    "Registers Per Thread" "Waves Per SM")
  {
    echo "attention_profile: variant 3 at ${lengths[*]} tokens (ncu, one launch each)"
    echo "| metric | ${lengths[0]} | ${lengths[1]} |"
    echo "|---|---|---|"
    for m in "${metrics[@]}"; do
      row="| $m"
      for len in "${lengths[@]}"; do
        # The metric's name as a fixed string (some hold parentheses): "value unit".
        v=$(awk -v m="$m" '$0 ~ /^ +/ && index($0, " " m " ") { print $NF, $(NF-1); exit }' \
          "$logdir/attention_profile_${len}_details.txt" || true)
        row="$row | ${v:-?}"
      done
      echo "$row |"
    done
  } >"$logdir/attention_profile.table"
  cat "$logdir/attention_profile.table"
)

# Whether the sustained workloads run under the power cap: the Qwen2.5-VL-7B bench config
# on 8192 224² images, then 1024 videos (8 x 336 x 448), each under power_sample.
power_qwen() (
  set -euo pipefail
  bundle=$(cd "$1" && pwd)
  logdir=$(cd "$2" && pwd)  # absolute: the trace path goes into the config
  config=$root/configs/qwen2_5_vl_bench.toml
  trace=$logdir/qwen_power_video.jsonl
  for _ in $(seq 1024); do
    echo '{"modality": "video", "frames": 8, "height": 336, "width": 448}'
  done >"$trace"
  power_sample "$logdir" qwen_power_224 \
    "$bundle/bin/encgraph" bench --config "$config" --set workload.count=8192 \
    --report "$logdir/qwen_power_224.json"
  power_sample "$logdir" qwen_power_video \
    "$bundle/bin/encgraph" bench --config "$config" --set 'workload.kind="trace"' \
    --set "workload.trace=\"$trace\"" \
    --report "$logdir/qwen_power_video.json"
  for w in 224 video; do  # items/s per mode, from the report's results
    python3 -c 'import json, sys
print(sys.argv[2] + ": " + ", ".join("%s %.1f items/s" % (r["mode"], r["items_per_s"])
                                     for r in json.load(open(sys.argv[1]))["results"]))' \
      "$logdir/qwen_power_$w.json" "$w" | tee -a "$logdir/qwen_power_$w.table"
  done
)

# SigLIP so400m's sustained rate: siglip_bench (graphs, requests of 64, 2048 images, 4
# passes) under power_sample.
power_siglip() (
  set -euo pipefail
  bundle=$1
  logdir=$2
  power_sample "$logdir" siglip_power \
    "$bundle/bin/siglip_bench" --device cuda --weights random --set hidden_size=1152 \
    --set intermediate_size=4304 --set num_hidden_layers=27 --set num_attention_heads=16 \
    --set image_size=384 --set patch_size=14 --images 2048 --request-size 64 --repeats 4 \
    --modes graphs
  echo "siglip_bench: $(grep -o '"images_per_s": [0-9.]*' "$logdir/siglip_power_bench.log")" |
    tee -a "$logdir/siglip_power.table"
)

# Multi-process data parallelism on 2 GPUs (mp_check.py): mpirun and RANK/WORLD_SIZE
# launches against one process, and a killed rank under each; 77 with one GPU.
mp_check() {
  mpi_env "$1" && mkdir -p "$2" &&
    python3 "$here/mp_check.py" --bundle "$1" --out-dir "$2" "${@:3}"
}

# `encgraph serve` under 64 closed-loop clients (one 224² image a request) against
# `encgraph bench` on the same config: the Qwen2.5-VL tower, no repeats, then half of the
# images repeated (the embedding cache). SERVE_BENCH_ARGS adds options, e.g.
# --config configs/siglip.toml.
bench_serve() {
  local repeat
  for repeat in 0 0.5; do
    python3 "$here/serve_bench.py" --encgraph "$1/bin/encgraph" --plugin-dir "$1/plugins" \
      --config "$root/configs/qwen2_5_vl.toml" --repeat "$repeat" \
      --table "$2/serve_bench.table" ${SERVE_BENCH_ARGS:-} "${@:3}" || return
  done
}

# Host staging against replay time, and the first-batch split, on the bench config at debug
# level: 48 videos and 96 224² images in requests of 16, 32 images one a request.
probe_staging() (
  set -uo pipefail
  bundle=$1
  logdir=$2
  for w in v i x; do
    size=16
    case $w in
      v) item='{"modality": "video", "frames": 8, "height": 336, "width": 448}' n=48 ;;
      i) item='{"modality": "image", "height": 224, "width": 224}' n=96 ;;
      x) item='{"modality": "image", "height": 224, "width": 224}' n=32 size=1 ;;
    esac
    for _ in $(seq "$n"); do echo "$item"; done >"$logdir/probe_$w.jsonl"
    "$bundle/bin/encgraph" bench --config "$root/configs/qwen2_5_vl_bench.toml" \
      --set 'workload.kind="trace"' --set "workload.trace=\"$logdir/probe_$w.jsonl\"" \
      --set workload.request_size=$size --set 'runtime.log_level="debug"' \
      --report "$logdir/probe_$w.json" "${@:3}" >"$logdir/probe_$w.log" 2>&1
    echo "probe $w rc=$?"
    grep -E "host staging|split" "$logdir/probe_$w.log" | tail -6 | sed 's/.*\] //'
    python3 -c "import json, sys
for x in json.load(open(sys.argv[1]))['results']:
    print(x['mode'], round(x['items_per_s'], 1), x['latency_ms']['p50'], x['batches_graph'])" \
      "$logdir/probe_$w.json"
  done
)

# unpack_bundle BUNDLE: restores what gpu-bundle.sh compressed (packed/<dir>/*.xz back
# into lib/, bin/ and plugins/), with xz or, where it is missing, Python's lzma. Idempotent.
unpack_bundle() {
  local bundle=$1 dir f out
  for dir in lib bin plugins; do
    for f in "$bundle/packed/$dir"/*.xz; do
      [[ -f $f ]] || continue
      out=$bundle/$dir/$(basename "$f" .xz)
      [[ -f $out && $out -nt $f ]] && continue
      if command -v xz >/dev/null 2>&1; then
        xz -dkc "$f" >"$out.tmp"
      else
        python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$f" "$out.tmp"
      fi
      mv "$out.tmp" "$out"
      [[ $dir == lib ]] || chmod +x "$out"
    done
  done
}

# Run as a program: one step, or the table.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-} in
    --list) echo "$STEPS" | sed '/^$/d' ;;
    --unpack) unpack_bundle "${2:?usage: steps.sh --unpack BUNDLE}" ;;
    "" | -h | --help)
      sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
      echo "steps:"
      echo "$STEPS" | awk 'NF { print "  " $1 }'
      ;;
    *)
      step=$1
      shift
      echo "$STEPS" | awk -v s="$step" '$1 == s { found = 1 } END { exit !found }' || {
        echo "steps.sh: no step '$step' (bash scripts/gpu/steps.sh --list)" >&2
        exit 2
      }
      [[ $# -ge 2 ]] || { echo "usage: steps.sh $step BUNDLE LOGDIR [options]" >&2; exit 2; }
      bundle=$(cd "$1" && pwd)
      mkdir -p "$2"
      logdir=$(cd "$2" && pwd)
      shift 2
      # By hand (not through gpu-run-all.sh): the bundle's libraries and plugins.
      if [[ -z ${ENCGRAPH_PLUGIN_PATH:-} ]]; then
        unpack_bundle "$bundle"
        export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
        export ENCGRAPH_PLUGIN_PATH=$bundle/plugins NCCL_NVLS_ENABLE=0
      fi
      "$step" "$bundle" "$logdir" "$@"
      ;;
  esac
fi
