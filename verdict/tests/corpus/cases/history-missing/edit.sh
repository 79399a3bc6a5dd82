set -e
rm history.ndjson
