set -e
awk 'NR == 7 { print substr($0, 1, 30); next } { print }' etcd.ndjson > x && mv x etcd.ndjson
