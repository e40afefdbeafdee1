# Sourced by install.sh: which torch to build against.
#
# ringreduce_torch_plan INSTALLED prints one line:
#   keep [NOTE]          build against the installed torch (NOTE: why it is worth saying)
#   install VERSION      pip install torch==VERSION first
#   refuse MESSAGE       stop: MESSAGE says why and how to go on
# INSTALLED is the installed torch's version (torch.__version__, a local
# suffix such as +cpu allowed), empty where there is none.
#
# A torch the build is written for (2.11 and newer) is kept, as
# `pip install --no-build-isolation .` would build against it: a user's
# `pip install torch` (2.14.1, the CUDA wheel) must not be replaced by our
# default behind their back. Where there is none, RINGREDUCE_TORCH (default
# 2.13.0, the release CI tests). One older than 2.11 is refused with the way
# on. RINGREDUCE_TORCH set explicitly installs that release unless it is the
# one installed already.
RINGREDUCE_DEFAULT_TORCH=2.13.0
RINGREDUCE_OLDEST_TORCH=2.11
RINGREDUCE_NEWEST_TESTED_TORCH=2.14.1

# True when version $1 sorts before $2 (release numbers only).
ringreduce_version_before() {
  [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]
}

ringreduce_torch_plan() {
  local installed=${1%%+*} wanted=${RINGREDUCE_TORCH:-}
  if [ -n "$wanted" ]; then
    if [ "$installed" = "$wanted" ]; then echo "keep"; else echo "install $wanted"; fi
    return 0
  fi
  if [ -z "$installed" ]; then
    echo "install $RINGREDUCE_DEFAULT_TORCH"
  elif ringreduce_version_before "$installed" "$RINGREDUCE_OLDEST_TORCH"; then
    echo "refuse torch $1 is installed, older than $RINGREDUCE_OLDEST_TORCH, the oldest this" \
         "build is written for; it is left as it is. Upgrade it (pip install 'torch>=$RINGREDUCE_OLDEST_TORCH')," \
         "or let this script install $RINGREDUCE_DEFAULT_TORCH in its place:" \
         "RINGREDUCE_TORCH=$RINGREDUCE_DEFAULT_TORCH bash scripts/install.sh"
  elif ringreduce_version_before "$RINGREDUCE_NEWEST_TESTED_TORCH" "$installed"; then
    echo "keep (newer than $RINGREDUCE_NEWEST_TESTED_TORCH, the newest this build was tested with)"
  else
    echo "keep"
  fi
}
