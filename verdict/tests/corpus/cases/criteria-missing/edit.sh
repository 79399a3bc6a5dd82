set -e
rm criteria.json
