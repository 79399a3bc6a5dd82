rm -r logs
