set -e
rm probes.json
