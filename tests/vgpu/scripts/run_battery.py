import json

from devfix.vgpu.battery import run_all

print(json.dumps(run_all()))
