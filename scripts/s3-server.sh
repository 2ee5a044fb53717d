#!/usr/bin/env bash
# An S3-compatible server for the backup store's tests: s3rver (npm, MIT), which keeps its
# objects in a directory and checks requests' SigV4 signatures (access key and secret key
# S3RVER). Installs it into .tools/s3rver on first use (npm, a few seconds), then runs it in the
# foreground until killed, with the bucket waggle-backups created:
#   scripts/s3-server.sh DIR PORT
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: s3-server.sh DIR PORT}
port=${2:?usage: s3-server.sh DIR PORT}
tools=.tools/s3rver
if [ ! -x "$tools/node_modules/.bin/s3rver" ]; then
  command -v npm >/dev/null || { echo "s3-server.sh: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --silent s3rver@3.7.1 >&2
fi
mkdir -p "$dir"
exec node "$tools/node_modules/.bin/s3rver" -d "$dir" -a 127.0.0.1 -p "$port" -s --configure-bucket waggle-backups
