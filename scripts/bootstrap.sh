# Sourced by run.sh and test.sh: makes .venv and installs the project into it,
# again only when pyproject.toml or the requested extras change.
# Usage: source scripts/bootstrap.sh [extras]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"

apt_install() {  # apt_install PKG... : installs Debian packages when we may (root, apt present)
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing $* from Debian's packages" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >/dev/null
  else
    echo "bootstrap: please install $* (not root or no apt-get)" >&2
    return 1
  fi
}

if [ ! -x "$VENV/bin/python" ]; then
  # Debian's python3 lacks ensurepip until python3-venv is installed.
  if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    apt_install python3-venv
    "$PY" -m venv "$VENV"
  fi
fi
stamp="$VENV/.installed-$(cat "$ROOT/pyproject.toml" | cksum | cut -d' ' -f1)-${EXTRAS//,/_}"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing scrapy-neardup${EXTRAS:+[$EXTRAS]} into .venv" >&2
  # pip's build chatter goes to a log, shown only when the install fails
  if ! { "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip &&
         "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT${EXTRAS:+[$EXTRAS]}"; } \
         >"$VENV/install.log" 2>&1; then
    tail -40 "$VENV/install.log" >&2
    echo "bootstrap: install failed (full log: $VENV/install.log)" >&2
    exit 1
  fi
  rm -f "$VENV"/.installed-*
  # numba compiles its kernels on first use and caches them: do it now, once
  # (a crawl would not wait for it, but would run the slower reference path meanwhile)
  "$VENV/bin/neardup" warmup >&2
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
