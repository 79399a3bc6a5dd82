set -e
# A killed agent: the first 102 bytes of one more record, and no newline.
printf '%s' '{"seq":5000,"probe":"get","mode":"new","start_unix_ms":1795719679000.5,"start_mono_ms":13000.1,"durati' >> records.ndjson
