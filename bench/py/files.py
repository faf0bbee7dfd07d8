"""Files through the official Python SDK (PyPI e2b, from
test/compat/py/.venv): files.write then files.read of 1, 50 and 256 MiB of
random bytes in one sandbox, the best of 3 each (throughput, not queueing).
Prints `go test -bench` style lines, as bench/js/files.mjs does for the JS
SDK."""

import os
import sys
import time

from e2b import Sandbox

SIZES = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "1,50,256").split(",")]

sbx = Sandbox.create(timeout=600)
try:
    for mib in SIZES:
        data = os.urandom(mib << 20)
        up = down = 0.0
        for _ in range(3):
            sbx.commands.run("rm -f /tmp/blob")  # an upload is written beside the file it replaces
            t = time.perf_counter()
            sbx.files.write("/tmp/blob", data)
            up = max(up, mib / (time.perf_counter() - t))
            t = time.perf_counter()
            got = sbx.files.read("/tmp/blob", format="bytes")
            down = max(down, mib / (time.perf_counter() - t))
            if bytes(got) != data:
                raise RuntimeError(f"the read of {mib} MiB differs")
        print(f"BenchmarkFiles/py-sdk/{mib}MiB 3 0 ns/op {up:.1f} upload-MB/s {down:.1f} download-MB/s", flush=True)
finally:
    sbx.kill()
