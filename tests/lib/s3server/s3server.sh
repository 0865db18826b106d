#!/usr/bin/env bash
# Starts an S3-compatible server (the npm package @20minutes/s3rver, version pinned in
# package.json and package-lock.json beside this script) for the fetch tests:
#   s3server.sh --dir DIR --portfile FILE [--bucket NAME]...
# The package is installed with `npm ci` on first use into $TAAS_TEST_CACHE (default
# ~/.cache/taas-tests)/s3server-<hash of the lock file>, so a fresh machine needs only Node.js,
# npm and the npm registry. The server runs in the foreground (exec), so the caller's pid is
# the server's: SIGTERM stops it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache_root="${TAAS_TEST_CACHE:-${HOME:-/tmp}/.cache/taas-tests}"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "s3server.sh: $tool is not installed (apt-get install nodejs npm)" >&2; exit 3; }
done
lock_hash="$(sha256sum "$here/package-lock.json" | cut -c1-16)"
dest="$cache_root/s3server-$lock_hash"
mkdir -p "$cache_root"
if [ ! -f "$dest/.installed" ]; then
  # one installer at a time: tests run in parallel
  exec 9>"$cache_root/s3server.lock"
  flock -w 300 9 || { echo "s3server.sh: timed out waiting for another install" >&2; exit 3; }
  if [ ! -f "$dest/.installed" ]; then
    rm -rf "$dest.partial"
    mkdir -p "$dest.partial"
    cp "$here/package.json" "$here/package-lock.json" "$dest.partial/"
    if ! (cd "$dest.partial" && npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
      echo "s3server.sh: npm ci failed in $dest.partial:" >&2
      tail -20 "$dest.partial/npm.log" >&2
      exit 3
    fi
    touch "$dest.partial/.installed"
    rm -rf "$dest"
    mv "$dest.partial" "$dest"
  fi
  exec 9>&-
fi
export NODE_PATH="$dest/node_modules"
exec node "$here/server.js" "$@"
