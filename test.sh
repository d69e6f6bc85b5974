#!/usr/bin/env bash
# The whole test suite. Extra arguments go to pytest.
source "$(dirname "$0")/scripts/bootstrap.sh" "test"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest -W error::DeprecationWarning "$@"
