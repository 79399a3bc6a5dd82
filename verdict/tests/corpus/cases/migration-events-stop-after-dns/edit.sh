set -e
# Everything after the MigrateDNSRecords step's line is gone.
awk '{ print } /"name":"MigrateDNSRecords"/ { exit }' events.ndjson > e && mv e events.ndjson
tail -1 events.ndjson | grep -q MigrateDNSRecords
