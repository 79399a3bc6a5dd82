set -e
grep -v '"name":"MigrationCompleted"' events.ndjson > e && mv e events.ndjson
