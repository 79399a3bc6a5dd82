set -e
sed '/"name":"EtcdMigrationComplete"/s/"status":"True"/"status":"False"/' events.ndjson > e && mv e events.ndjson
grep -q '"EtcdMigrationComplete","status":"False"' events.ndjson
