set -e
rm -r logs
