"""Reads `name==version` lines and writes each with the sha256 of the
wheels of that release (PyPI's simple API, in JSON) that CPython 3.13 on x86-64
glibc Linux can install: pure-Python ones, and cp313, abi3 and
Python-independent ones for manylinux x86-64. Used by code-interpreter-lock.sh."""
import json
import re
import sys
import urllib.request

WHEEL = re.compile(r"^(?P<dist>[^-]+)-(?P<ver>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


def fits(filename):
    m = WHEEL.match(filename)
    if not m:
        return False
    py, abi, plat = m["py"].split("."), m["abi"].split("."), m["plat"].split(".")
    pure = any(p.startswith("py3") for p in py)
    if "none" in abi and "any" in plat:
        return pure
    if not any(p.startswith("manylinux") and p.endswith("_x86_64") for p in plat):
        return False
    if "none" in abi:  # a library bundled with pure Python (soundfile's libsndfile)
        return pure
    if "cp313" in py and "cp313" in abi:
        return True
    if "abi3" in abi:
        return any(re.fullmatch(r"cp3(\d+)", p) and int(p[3:]) <= 13 for p in py)
    return False


def main():
    for line in sys.stdin:
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, version = line.split("==")
        req = urllib.request.Request(f"https://pypi.org/simple/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            files = json.load(r)["files"]
        hashes = sorted(f["hashes"]["sha256"] for f in files
                        if f["filename"].endswith(".whl") and WHEEL.match(f["filename"])["ver"] == version and fits(f["filename"]))
        if not hashes:
            sys.exit(f"{name}=={version}: no wheel for CPython 3.13 on x86-64 Linux")
        print(f"{name}=={version}" + "".join(f" \\\n    --hash=sha256:{h}" for h in hashes))


main()
