# Sourced by install.sh, test.sh and train.sh: sets PYTHON, the interpreter
# torch_ringreduce is installed into and run with.
#
#   1. $PYTHON, when the caller names one;
#   2. else python3, when pip may install into it (an activated venv, conda,
#      pyenv, or a self-built Python);
#   3. else (python3 is "externally managed", PEP 668, as Debian's
#      /usr/bin/python3 is) a virtual environment in the checkout's .venv:
#      pip refuses to touch the system's packages, and we never force it to.
#
# ringreduce_python_env [create]: with "create", step 3 makes the venv when
# it does not exist yet.
ringreduce_python_env() {
  local root venv
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  venv="$root/.venv"
  if [ -n "${PYTHON:-}" ]; then
    return 0
  fi
  local base
  base=$(command -v python3) || { echo "[python] no python3 on PATH" >&2; return 1; }
  if ! "$base" - <<'PY'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(1 if managed and sys.prefix == sys.base_prefix else 0)
PY
  then
    if [ -x "$venv/bin/python" ]; then
      PYTHON="$venv/bin/python"
      return 0
    fi
    if [ "${1:-}" != create ]; then
      echo "[python] $base is externally managed and $venv does not exist: run scripts/install.sh" >&2
      return 1
    fi
    echo "[python] $base is externally managed (PEP 668): installing into a virtual environment, $venv"
    "$base" -m venv "$venv" || { echo "[python] could not create $venv" >&2; return 1; }
    PYTHON="$venv/bin/python"
    return 0
  fi
  PYTHON="$base"
}
