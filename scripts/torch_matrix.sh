#!/usr/bin/env bash
# Builds torch_ringreduce as a user would (`pip install --no-build-isolation .`)
# against each torch named, each in its own virtual environment, with the
# machine's CUDA toolkit in three states, runs the 2-rank smoke test (torchrun,
# DDP over ringreduce) on each build, and prints a table:
#
#   toolkit  none:    no nvcc and no toolkit folder (expect: CPU path only)
#            partial: nvcc and headers, no libraries (expect: CPU path only)
#            full:    the machine's toolkit as it is (expect: the CUDA path)
#
# Usage: bash scripts/torch_matrix.sh [TORCH...]
#   TORCH: a pip requirement (torch==2.14.1) or the path of a Python that has
#   torch already. Default: torch==2.13.0 torch==2.14.1.
# Environment:
#   TORCH_MATRIX_VENVS     where the virtual environments go (build/torch-matrix/venvs)
#   TORCH_MATRIX_TOOLKITS  the toolkit states to try ("none partial full")
#   TORCH_MATRIX_CMAKE     a CMake release from PyPI to build with (default: the machine's)
#   MAX_JOBS               compile jobs (2)
#
# Hiding the toolkit takes a private mount namespace (`unshare --mount`, as
# root): nothing changes outside this script's processes. Where that is not
# allowed, the none and partial rows say "skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/build/torch-matrix
VENVS=${TORCH_MATRIX_VENVS:-$WORK/venvs}
TOOLKITS=${TORCH_MATRIX_TOOLKITS:-none partial full}
export MAX_JOBS=${MAX_JOBS:-2} TORCH_DEVICE_BACKEND_AUTOLOAD=0

# The toolkit folders nvcc uses (its --dryrun says TOP), wherever the nvcc
# that names them lives, plus the usual install places.
toolkit_roots() {
  local candidates=() nvcc top
  for nvcc in $(type -ap nvcc) /usr/local/cuda*/bin/nvcc; do
    [ -x "$nvcc" ] || continue
    top=$("$nvcc" --dryrun -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
    [ -n "$top" ] && candidates+=("$(realpath "$top")")
  done
  for top in /usr/local/cuda /usr/local/cuda-* "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do
    [ -n "$top" ] && [ -d "$top" ] && candidates+=("$(realpath "$top")")
  done
  printf '%s\n' "${candidates[@]}" | sort -u
}

# Replaces a folder's view with links to everything in it but NAME (the
# folder itself stays untouched, seen through a bind mount).
hide_entry() {
  local dir=$1 name=$2 stash entry
  stash=$(mktemp -d "$WORK/stash.XXXXXX")
  mount --bind "$dir" "$stash" && mount -t tmpfs tmpfs "$dir" || return 1
  for entry in "$stash"/* "$stash"/.[!.]*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    [ "$(basename "$entry")" = "$name" ] || ln -s "$entry" "$dir/$(basename "$entry")"
  done
}

# Runs inside the private mount namespace: hides what CASE says is absent.
hide_toolkit() {
  local case=$1 root lib nvcc
  local roots
  mapfile -t roots < <(toolkit_roots)
  for root in "${roots[@]}"; do
    if [ "$case" = none ]; then
      mount -t tmpfs tmpfs "$root" || return 1
    else
      for lib in $(realpath -e "$root"/lib64 "$root"/lib "$root"/targets/*/lib 2>/dev/null |
                   sort -u); do
        mount -t tmpfs tmpfs "$lib" || return 1
      done
    fi
  done
  [ "$case" = none ] || return 0
  # An nvcc outside the toolkit (a link or wrapper in /usr/local/bin).
  for nvcc in $(type -ap nvcc) /usr/local/bin/nvcc; do
    [ -e "$nvcc" ] || continue
    case "$(dirname "$nvcc")" in
      /usr/bin|/bin) echo "cannot hide $nvcc: it lives beside the compilers" >&2; return 1 ;;
    esac
    hide_entry "$(dirname "$nvcc")" nvcc || return 1
  done
  ! command -v nvcc >/dev/null
}

# One cell: build, say whether the CUDA path was compiled and which UCX, run
# the smoke test. Writes "build|cuda|ucx|smoke|detail" to RESULT.
run_case() {
  local case=$1 python=$2 build_dir=$3 result=$4 log=$5 info detail cuda ucx smoke
  if [ "$case" != full ] && ! hide_toolkit "$case" >>"$log" 2>&1; then
    echo "skipped|-|-|-|could not hide the toolkit (see $log)" >"$result"
    return
  fi
  # -v: the configure step's "ringreduce:" lines go to the log.
  if ! RINGREDUCE_BUILD_DIR=$build_dir "$python" -m pip install -v --no-build-isolation \
      --no-deps --no-index . >>"$log" 2>&1; then
    echo "FAILED|-|-|-|$(grep -m1 -E 'Error|error:' "$log" | cut -c1-160)" >"$result"
    return
  fi
  info=$(cd "$WORK" && "$python" -m torch_ringreduce.info 2>>"$log")
  echo "$info" >>"$log"
  detail=$(sed -n 's/^CUDA path: *//p' <<<"$info")
  ucx=$(sed -n 's/^UCX (built against): *\(.*\) (.*/\1/p' <<<"$info")
  case "$detail" in compiled*) cuda=yes ;; "not compiled"*) cuda=no ;; *) cuda="?" ;; esac
  smoke=FAILED
  if (cd "$WORK" && UCX_NET_DEVICES=lo OMP_NUM_THREADS=1 timeout 300 "$python" \
        -m torch.distributed.run --standalone --nproc-per-node 2 \
        "$ROOT/examples/train_ddp.py" --steps 40 --log-every 40 >>"$log" 2>&1) &&
     grep -q "backend ringreduce, world 2: loss" "$log"; then
    smoke=ok
  fi
  echo "ok|$cuda|$ucx|$smoke|$detail" >"$result"
}

if [ "${1:-}" = --case ]; then   # re-entered inside `unshare --mount`
  shift
  run_case "$@"
  exit 0
fi

# A virtual environment with TORCH (a requirement) unless TORCH is a Python.
python_for() {
  local spec=$1 venv
  if [ -x "$spec" ]; then echo "$spec"; return; fi
  venv=$VENVS/$(echo "$spec" | tr -c 'A-Za-z0-9.\n' '-')
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "[matrix] $venv: pip install $spec" >&2
    python3 -m venv "$venv" >&2 &&
      "$venv/bin/python" -m pip install -q "$spec" numpy "setuptools>=70.1" >&2 || return 1
  fi
  if [ -n "${TORCH_MATRIX_CMAKE:-}" ]; then
    "$venv/bin/python" -m pip install -q "cmake==$TORCH_MATRIX_CMAKE" >&2 || return 1
  fi
  echo "$venv/bin/python"
}

mkdir -p "$WORK" "$VENVS"
# Mount points of earlier runs' namespaces, empty once those ended.
rmdir "$WORK"/stash.* 2>/dev/null
[ $# -gt 0 ] || set -- torch==2.13.0 torch==2.14.1
rows=()
for spec in "$@"; do
  python=$(python_for "$spec") || { rows+=("$spec|-|venv FAILED|-|-|-|-"); continue; }
  version=$("$python" -c "import torch; print(torch.__version__)")
  bin=$(dirname "$python")
  for case in $TOOLKITS; do
    tag=$version-$case
    log=$WORK/$tag.log
    result=$WORK/$tag.result
    : >"$log"
    echo "[matrix] torch $version, toolkit $case (log: $log)" >&2
    # The venv's bin first: its cmake when TORCH_MATRIX_CMAKE asks for one.
    if [ "$case" = full ]; then
      PATH=$bin:$PATH bash "$0" --case "$case" "$python" "$WORK/build-$tag" "$result" "$log"
    else
      PATH=$bin:$PATH unshare --mount --propagation private \
        bash "$0" --case "$case" "$python" "$WORK/build-$tag" "$result" "$log" ||
        echo "skipped|-|-|-|unshare --mount is not allowed here" >"$result"
    fi
    rows+=("$version|$case|$(cat "$result")")
  done
done

cmake_version=$(PATH=$bin:$PATH cmake --version | head -1)
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) cores, $cmake_version, nvcc: $(
  nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo none)"
echo
echo "| torch | toolkit | build | CUDA path compiled | UCX built against | 2-rank smoke test |"
echo "|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  IFS='|' read -r version case build cuda ucx smoke detail <<<"$row"
  echo "| $version | $case | $build | $cuda | $ucx | $smoke |"
done
echo
echo "What \`python -m torch_ringreduce.info\` said of the CUDA path:"
for row in "${rows[@]}"; do
  IFS='|' read -r version case build cuda ucx smoke detail <<<"$row"
  echo "- $version, $case: $detail"
done
failed=$(printf '%s\n' "${rows[@]}" | awk -F'|' '$3 != "ok" || $6 != "ok"' | wc -l)
exit $((failed > 0))
