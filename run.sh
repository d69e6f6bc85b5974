#!/usr/bin/env bash
# The main job: crawl URL(s) with the near-duplicate filter, or, with no URL,
# serve the built-in demo site on 127.0.0.1 and crawl it.
#   bash run.sh [URL ...] [--out DIR] [-s NAME=VALUE] [-a SPIDER_ARG=VALUE]
source "$(dirname "$0")/scripts/bootstrap.sh" ""
cd "$ROOT"
exec "$VENV/bin/neardup" crawl "$@"
