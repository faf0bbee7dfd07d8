# The floor of a code interpreter's round trip: IPython's kernel driven by
# the reference client (jupyter_client, Debian's python3-jupyter-client)
# executing 1+1, as Cove's server does. Prints a `go test -bench` line.
import sys
import time

from jupyter_client.manager import start_new_kernel

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
km, kc = start_new_kernel(kernel_name="python3")
try:
    for _ in range(10):
        kc.execute_interactive("1+1", output_hook=lambda m: None, timeout=10)
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        kc.execute_interactive("1+1", output_hook=lambda m: None, timeout=10)
        samples.append((time.perf_counter() - start) * 1000)
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
samples.sort()
at = lambda q: samples[int(q * (len(samples) - 1))]
print(f"BenchmarkPeer/jupyter-client {len(samples)} 0 ns/op {at(0.5):.2f} p50-ms {at(0.95):.2f} p95-ms {at(0.99):.2f} p99-ms", flush=True)
