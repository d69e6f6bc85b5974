#!/usr/bin/env bash
# The whole test suite. Extra arguments go to pytest.
source "$(dirname "$0")/scripts/bootstrap.sh" "test,redis,corpus,spark"
# the shared-store and shared-frontier tests start their own redis-server (and a 3-node cluster)
command -v redis-server >/dev/null 2>&1 || apt_install redis-server || echo "test.sh: the Redis tests will skip" >&2
# the language-mirror tests serve their generated sites with nginx (its real ETag, Range and If-Range)
{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } \
    || apt_install nginx-light || apt_install nginx || echo "test.sh: the nginx-served mirror tests will skip" >&2
# the report's browser tests drive Debian's chromium, headless, through its chromium-driver
{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } \
    || apt_install chromium chromium-driver || echo "test.sh: the report's browser tests will skip" >&2
# the Spark job's tests run Spark local[2], which needs Java 17
command -v java >/dev/null 2>&1 || apt_install openjdk-17-jre-headless || echo "test.sh: the Spark tests will skip" >&2
cd "$ROOT"
exec "$VENV/bin/python" -m pytest -W error::DeprecationWarning "$@"
