set -e
printf '{"layout": 3, "written_by": "cpmlab 9.0.0"}\n' > layout.json
