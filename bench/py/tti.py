"""Create → first command output through the official Python SDK (PyPI
e2b, from test/compat/py/.venv): Sandbox.create() then
commands.run('echo hi'), one sandbox after another, with the sync client
and with the async one. Prints `go test -bench` style lines named by the
first argument, as bench/js/tti.mjs does for the JS SDK."""

import asyncio
import sys
import time

from e2b import AsyncSandbox, Sandbox

LABEL = sys.argv[1] if len(sys.argv) > 1 else "pooled"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 50
PACE = 0.150  # the Go harness's


def report(name, samples):
    samples.sort()
    at = lambda q: f"{samples[int(q * (len(samples) - 1))]:.2f}"  # noqa: E731
    print(f"BenchmarkE2E/{name}/{LABEL} {len(samples)} 0 ns/op {at(0.5)} p50-ms {at(0.95)} p95-ms {at(0.99)} p99-ms", flush=True)


def sync_client():
    samples = []
    for _ in range(N):
        time.sleep(PACE)
        start = time.perf_counter()
        sbx = Sandbox.create(timeout=60)
        r = sbx.commands.run("echo hi")
        if r.stdout != "hi\n":
            raise RuntimeError(f"echo printed {r.stdout!r}")
        samples.append((time.perf_counter() - start) * 1000)
        sbx.kill()
    report("py-sdk-sync", samples)


async def async_client():
    samples = []
    for _ in range(N):
        await asyncio.sleep(PACE)
        start = time.perf_counter()
        sbx = await AsyncSandbox.create(timeout=60)
        r = await sbx.commands.run("echo hi")
        if r.stdout != "hi\n":
            raise RuntimeError(f"echo printed {r.stdout!r}")
        samples.append((time.perf_counter() - start) * 1000)
        await sbx.kill()
    report("py-sdk-async", samples)


sync_client()
asyncio.run(async_client())
