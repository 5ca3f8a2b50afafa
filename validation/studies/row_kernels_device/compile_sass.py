"""On the GPU machine: compile every distinct suite kernel exactly as the runners do (CuPy/NVRTC),
then dump the SASS of the cached cubins (CuPy's cache files start with a 32-byte md5 header)."""
import glob, os, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1])
os.environ["CUPY_CACHE_DIR"] = "/tmp/cc2"
import cupy
from validation.harness.suite_file import load_suite
from validation.families.softmax import runner as sm
from validation.families.layernorm import runner as ln
print("nvrtc", cupy.cuda.nvrtc.getVersion(), "cupy", cupy.__version__, flush=True)
for fam, r in (("softmax", sm), ("layernorm", ln)):
    before = set(glob.glob("/tmp/cc2/**/*", recursive=True))
    seen = set()
    for cfg in load_suite(fam):
        src = r.kernel_source(cfg)
        key = src.name_expressions[0]
        if key in seen:
            continue
        seen.add(key)
        cupy.RawModule(code=src.code, options=src.options, name_expressions=src.name_expressions).get_function(key)
    new = sorted(set(glob.glob("/tmp/cc2/**/*", recursive=True)) - before)
    print(fam, len(seen), "kernels,", len(new), "cache files", flush=True)
    with open(out / f"sass_{fam}.txt", "w") as fh:
        for f in new:
            if os.path.isdir(f):
                continue
            data = open(f, "rb").read()
            cub = f"/tmp/x.cubin"
            i = data.find(b"\x7fELF")
            open(cub, "wb").write((data[i:] if i >= 0 else data) + bytes(64))
            p = subprocess.run(["cuobjdump", "-sass", cub], capture_output=True, text=True)
            fh.write(p.stdout)
            if p.returncode:
                print("cuobjdump failed", f, p.stderr[:200], flush=True)
