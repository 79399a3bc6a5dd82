set -e
rm final.json
