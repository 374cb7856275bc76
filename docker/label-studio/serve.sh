#!/usr/bin/env bash
# Start a local, offline Label Studio (PyPI label-studio==1.23.2) in the foreground.
#
# Idempotent: on an empty data dir it migrates the SQLite DB and creates the admin
# (with the given legacy API token); on an existing data dir it just starts
# (the admin already exists; its password is NOT changed and the token is NOT re-applied).
#
# Inputs (environment variables):
#   LS_PORT            port on 127.0.0.1                       (default 8089)
#   LS_DATA_DIR        data dir: SQLite DB, media, secret key   (required)
#   LS_ADMIN_EMAIL     admin login (an e-mail)                  (default admin@example.com)
#   LS_ADMIN_PASSWORD  admin password                           (required)
#   LS_ADMIN_TOKEN     admin legacy API token, > 5 chars; used as "Authorization: Token <it>" (required)
#   LS_VENV            venv holding label-studio                (default: <repo>/.venv-label-studio)
#   LS_LOG_LEVEL       DEBUG|INFO|WARNING|ERROR                 (default WARNING)
#   LS_BIND            address to listen on (default 127.0.0.1; 0.0.0.0 in a container)
#   LS_DJANGO_DB       sqlite | postgresql (then POSTGRE_HOST, POSTGRE_PORT, POSTGRE_NAME, POSTGRE_USER, POSTGRE_PASSWORD)
#
# The server only listens on 127.0.0.1; every known phone-home path is disabled and
# python-side outbound HTTP(S) is pointed at a dead local proxy (see NOTES.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

LS_PORT="${LS_PORT:-8089}"
LS_ADMIN_EMAIL="${LS_ADMIN_EMAIL:-admin@example.com}"
LS_VENV="${LS_VENV:-$repo/.venv-label-studio}"
LS_LOG_LEVEL="${LS_LOG_LEVEL:-WARNING}"
: "${LS_DATA_DIR:?set LS_DATA_DIR to the data directory}"
: "${LS_ADMIN_PASSWORD:?set LS_ADMIN_PASSWORD}"
: "${LS_ADMIN_TOKEN:?set LS_ADMIN_TOKEN (more than 5 characters)}"

if [ "${#LS_ADMIN_TOKEN}" -le 5 ]; then
    echo "serve.sh: LS_ADMIN_TOKEN must be longer than 5 characters" >&2
    exit 2
fi
if [ ! -x "$LS_VENV/bin/label-studio" ]; then
    echo "serve.sh: $LS_VENV/bin/label-studio not found; install with:" >&2
    echo "  python3 -m venv $LS_VENV && $LS_VENV/bin/pip install -r $here/requirements.txt" >&2
    exit 2
fi

# label-studio silently moves to port+1 (up to +1000) when the port is taken; refuse instead.
if "$LS_VENV/bin/python" - "$LS_PORT" <<'PY'
import socket, sys
s = socket.socket()
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)          # nothing listening: free
sys.exit(0)              # something answered: busy
PY
then
    echo "serve.sh: port $LS_PORT on 127.0.0.1 is already in use" >&2
    exit 3
fi

mkdir -p "$LS_DATA_DIR"
LS_DATA_DIR="$(cd "$LS_DATA_DIR" && pwd)"

# label-studio's get_env(NAME) reads LABEL_STUDIO_NAME, HEARTEX_NAME and plain NAME,
# so generic variables such as USERNAME, PASSWORD, PORT, HOST from the caller would leak in.
unset USERNAME PASSWORD USER_TOKEN PORT HOST DATABASE_NAME \
      HEARTEX_USERNAME HEARTEX_PASSWORD HEARTEX_USER_TOKEN HEARTEX_PORT HEARTEX_HOST

export LABEL_STUDIO_BASE_DATA_DIR="$LS_DATA_DIR"
export DJANGO_DB="${LS_DJANGO_DB:-sqlite}"   # postgresql: POSTGRE_HOST, POSTGRE_NAME, POSTGRE_USER, POSTGRE_PASSWORD
export LABEL_STUDIO_USERNAME="$LS_ADMIN_EMAIL"
export LABEL_STUDIO_PASSWORD="$LS_ADMIN_PASSWORD"
export LABEL_STUDIO_USER_TOKEN="$LS_ADMIN_TOKEN"
# Organization is created with legacy "Token <key>" auth on (only takes effect when the org is created).
export LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true
# Sign-up only through the organization's invite link (/api/invite).
export LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK=true
export LOG_LEVEL="$LS_LOG_LEVEL"

# No phone home.
export SENTRY_DSN=                  # backend Sentry (default DSN is baked into settings)
export FRONTEND_SENTRY_DSN=         # browser Sentry <script> from a CDN
export COLLECT_ANALYTICS=false      # usage telemetry POSTs
export LATEST_VERSION_CHECK=false   # PyPI latest-version lookup
export FEATURE_FLAGS_OFFLINE=true   # LaunchDarkly stays offline (default, made explicit)
export CONVERTER_DOWNLOAD_RESOURCES=false   # export never fetches task media
export ML_BLOCK_LOCAL_IP=true
# Anything python-side that still goes out with requests/urllib/sentry (e.g. the
# /heidi-tips proxy to GitHub that the UI calls) hits a dead local proxy and fails at once
# instead of doing a DNS lookup. Loopback stays direct.
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
export http_proxy="$HTTP_PROXY" https_proxy="$HTTPS_PROXY"
export NO_PROXY=localhost,127.0.0.1,::1 no_proxy=localhost,127.0.0.1,::1
export PYTHONUNBUFFERED=1
# label-studio runs `git describe --dirty` / `git show` in its package dir at start to report its
# version; with the venv inside this repo that would read (and refresh the index of) this repo.
export GIT_CEILING_DIRECTORIES="$repo"

cd "$LS_DATA_DIR"
exec "$LS_VENV/bin/label-studio" start \
    --no-browser \
    --internal-host "${LS_BIND:-127.0.0.1}" \
    --port "$LS_PORT" \
    --enable-legacy-api-token
