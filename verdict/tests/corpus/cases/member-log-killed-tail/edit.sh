set -e
printf '%s' '{"level":"info","ts":"2026-11-27T13:40:1' >> logs/corp-seed-a-etcd-2.log
