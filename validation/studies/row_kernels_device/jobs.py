"""Write the jobs JSON: every distinct kernel once at its smallest problem first, then the rest."""
import json, sys, dataclasses
from validation.harness.suite_file import load_suite
from tilesim.kernels import registry
fam = sys.argv[1]
F = registry.get(fam)
cfgs = sorted(load_suite(fam), key=lambda c: c.rows * c.cols)
first, rest, seen = [], [], set()
for c in cfgs:
    (rest if F.label(c) in seen else first).append(c)
    seen.add(F.label(c))
jobs = [{"index": i, "fields": {f.name: getattr(c, f.name) for f in dataclasses.fields(c)}} for i, c in enumerate(first + rest)]
json.dump(jobs, open(sys.argv[2], "w"))
print(fam, len(jobs), len(first))
