rm final.json
