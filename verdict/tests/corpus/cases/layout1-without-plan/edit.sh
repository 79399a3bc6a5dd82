rm probes.json
