"""Download the held-out kernels' third-party sources (validation/public/sources.toml) from GitHub.

They are not kept in this repository: ``python -m validation.public.fetch`` fetches each file from
``https://raw.githubusercontent.com/<repo>/<commit>/<path>`` into its git-ignored ``local`` path,
keeps the first ``bytes`` bytes of an excerpt, and checks the SHA-256 the recorded measurements were
taken on. Needs network access; says so in one line otherwise. ``--check`` only verifies local files.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tomllib
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST = Path(__file__).with_name("sources.toml")


def sources() -> list[dict]:
    return tomllib.loads(MANIFEST.read_text())["source"]


def missing() -> list[str]:
    """Local paths of the sources that are absent or differ from the recorded bytes."""
    out = []
    for s in sources():
        p = REPO_ROOT / s["local"]
        if not p.exists() or hashlib.sha256(p.read_bytes()).hexdigest() != s["sha256"]:
            out.append(s["local"])
    return out


def fetch(s: dict, timeout_s: float = 30.0) -> bytes:
    url = f"https://raw.githubusercontent.com/{s['repo']}/{s['commit']}/{s['path']}"
    with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 (a fixed https host)
        data = r.read()
    if s["excerpt"]:
        data = data[: s["bytes"]]
    got = hashlib.sha256(data).hexdigest()
    if got != s["sha256"]:
        raise ValueError(f"{url}: SHA-256 {got[:16]}.. differs from the recorded {s['sha256'][:16]}.. "
                         "(the file at that commit is not the one measured)")
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.public.fetch", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only verify the local copies")
    args = ap.parse_args(argv)
    todo = missing()
    if args.check or not todo:
        print("all held-out sources present and verified" if not todo else "missing or different: " + ", ".join(todo))
        return 0 if not todo else 1
    for s in sources():
        if s["local"] not in todo:
            continue
        try:
            data = fetch(s)
        except (OSError, ValueError) as e:
            print(f"validation.public.fetch: {s['repo']}/{s['path']}: {e}", file=sys.stderr)
            return 2
        dest = REPO_ROOT / s["local"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        print(f"fetched {s['local']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
