set -e
head -c 600 final.json > f && mv f final.json
