set -e
sed 's/"get",/"gett",/' probes.json > p && mv p probes.json
grep -q gett probes.json
