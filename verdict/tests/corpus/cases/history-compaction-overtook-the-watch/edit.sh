set -e
# The watch resumed from revision 572 is told etcd compacted to 590: the
# writer reads the counter at revision 590 (its version there is 590's)
# and watches again from 590; the versions from 572 to 589 it never saw.
latest=$(awk -F'[:,}]' '/"kind":"version"/ { if ($4 + 0 <= 590) l = $4 } END { print l }' history.ndjson)
test "$latest" = 590
awk -v l="$latest" '
  /"from_rev":572,/ { print; print "{\"kind\":\"compacted\",\"at_unix_ms\":1796164010200.0,\"from_rev\":572,\"compact_rev\":590,\"latest_rev\":" l "}"; skip = 1; next }
  skip && /"kind":"version"/ { split($0, f, /[:,}]/); if (f[4] + 0 < l) next; print; if (f[4] + 0 == l) { print "{\"kind\":\"watch\",\"at_unix_ms\":1796164010300.0,\"from_rev\":590,\"cluster\":\"e99c8e1f471198a3\",\"by\":\"observer\"}"; skip = 0 }; next }
  { print }' history.ndjson > h && mv h history.ndjson
grep -q '"compact_rev":590' history.ndjson
