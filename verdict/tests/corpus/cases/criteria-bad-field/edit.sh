set -e
sed 's/"stall_ms": 5000.0,/"stall_ms": 5000.0,\n  "stal_ms": 7000.0,/' criteria.json > c && mv c criteria.json
grep -q stal_ms criteria.json
