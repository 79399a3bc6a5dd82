set -e
# Every get on new connections from +30 s to +36 s timed out after 10 s.
awk -v a=1796163975973 -v b=1796163981973 '
  /"probe":"get","mode":"new"/ {
    split($0, f, /"start_unix_ms":/); split(f[2], g, /,/); t = g[1] + 0
    if (t >= a && t < b) {
      sub(/"duration_ms":[0-9.e+-]+/, "\"duration_ms\":10000.0")
      sub(/"outcome":"ok","http_status":200/, "\"outcome\":\"timeout\"")
      sub(/,"value":[0-9]+,"rv":[0-9]+/, "")
      sub(/}$/, ",\"error\":\"operation timed out\"}")
      n++
    }
  }
  { print }
  END { if (n < 20) exit 1 }' records.ndjson > r && mv r records.ndjson
