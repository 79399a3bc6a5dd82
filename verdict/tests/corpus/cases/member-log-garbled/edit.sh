set -e
awk 'NR == 40 { sub(/^[^ ]+ /, ""); print; next } { print }' logs/corp-seed-a-etcd-1.log > l && mv l logs/corp-seed-a-etcd-1.log
