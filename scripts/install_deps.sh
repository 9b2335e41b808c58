#!/usr/bin/env bash
# Install the locked dependencies into the venv: scripts/install_deps.sh VENV_BIN LOCK_FILE
#
# With uv where it can be had (its wheel from the package index, pinned): it downloads and installs
# in parallel, so the 200-odd packages (torch among them) take about a minute with their bytecode,
# where pip took three and a half. uv does not read pip's configuration, so the wheel folders,
# indexes and constraints pip is configured with (a machine's local torch wheel, for one) are
# passed on to it, and where two indexes hold a package it picks the best match as pip does.
# If uv cannot be installed or fails, pip installs the same lock, as before; CRUCIBLE_PIP=1 asks
# for pip outright. Either way each line of the installer's progress shows as it comes.
set -uo pipefail
bin=$1 lock=$2
UV_VERSION=0.13.9

pip_install() {
  # This machine's pip config may name index folders that do not exist; pip warns about each one.
  # Those lines are noise; a real failure still fails. --line-buffered: each line as pip writes it.
  "$bin/pip" install --disable-pip-version-check -r "$lock" 2>&1 \
    | { grep --line-buffered -v "is neither a file nor a directory" || true; }
}

# pip's configuration (files and PIP_* variables) as uv options; paths that do not exist are left out.
uv_options() {
  local key value item
  "$bin/pip" config list 2>/dev/null | while IFS='=' read -r key value; do
    value=${value#\'}
    value=${value%\'}
    for item in $value; do
      case "$key" in
        *.find-links)
          { [ -e "$item" ] || [[ $item == http* ]]; } && echo "--find-links=$item" ;;
        *.extra-index-url)
          { [ -d "${item#file://}" ] || [[ $item == http* ]]; } && echo "--extra-index-url=$item" ;;
        *.index-url)
          echo "--index-url=$item" ;;
        *.constraint)
          [ -f "$item" ] && echo "--constraint=$item" ;;
      esac
    done
  done | awk '!seen[$0]++'
}

# wait_for PID SECONDS: true once PID has ended, false when it is still running after SECONDS.
wait_for() {
  local pid=$1 i
  for (( i = 0; i < $2 * 10; i++ )); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  ! kill -0 "$pid" 2>/dev/null
}

if [ "${CRUCIBLE_PIP:-}" != 1 ]; then
  if [ -x "$bin/uv" ] || "$bin/pip" install --disable-pip-version-check -q "uv==$UV_VERSION" 2>/dev/null; then
    mapfile -t options < <(uv_options)
    "$bin/uv" pip install --python "$bin/python" --compile-bytecode --index-strategy unsafe-best-match \
      "${options[@]}" -r "$lock" &
    uv_pid=$!
    # uv shows no progress bar without a terminal, and compiling the bytecode (about a minute on
    # two cores) prints nothing until it ends: a line every 15 s says it is still at work.
    started=$SECONDS
    while ! wait_for "$uv_pid" 15; do echo "  … still installing ($(( SECONDS - started )) s)"; done
    if wait "$uv_pid"; then
      exit 0
    fi
    echo "uv could not install the lock; installing it with pip"
  else
    echo "uv is not available here; installing with pip"
  fi
fi
pip_install
