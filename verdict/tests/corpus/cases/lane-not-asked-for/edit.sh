sed '/^ *"get",$/d' probes.json > p && mv p probes.json
! grep -q '"get"' probes.json
