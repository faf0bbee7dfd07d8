"""What the suite's files share: the client under test (sync or async),
a sandbox per test, and waiting.

python_test.go sets E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, the three
variables the README gives, and COMPAT_RUN, a value of this run's own that
the suite's sandboxes carry in their metadata. Every test runs twice: with
the SDK's synchronous client and with its asynchronous one. Both have the
same methods, the async ones coroutines: `aw` awaits what needs it.
"""

import asyncio
import inspect
import os
import time
import urllib.error
import urllib.request

import pytest
from e2b import AsyncSandbox, Sandbox

RUN = os.environ.get("COMPAT_RUN", str(time.time_ns()))
# In E2B's domain mode (E2B_DOMAIN alone) the API is at api.<domain>.
API_URL = os.environ.get("E2B_API_URL") or "https://api." + os.environ["E2B_DOMAIN"]
API_KEY = os.environ["E2B_API_KEY"]
# Whether the server's sandboxes keep their processes in a snapshot or a
# fork (the Go test knows its driver).
COPIES_PROCESSES = os.environ.get("COMPAT_COPIES_PROCESSES") == "1"


async def aw(value):
    """The value, awaited while it is awaitable (an async client's call)."""
    while inspect.isawaitable(value):
        value = await value
    return value


async def wait_until(cond, timeout=60.0):
    """Polls cond (sync or async) every 50 ms until it is true; a bound on
    liveness, not a measure."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if await aw(cond()):
                return True
        except Exception:  # noqa: BLE001 - not there yet
            pass
        await asyncio.sleep(0.05)
    return False


def api_get(path):
    """The API's JSON answer to a GET with the suite's key (for what the
    SDK does not map)."""
    import json

    req = urllib.request.Request(API_URL + path, headers={"X-API-Key": API_KEY})
    with urllib.request.urlopen(req, timeout=30) as res:
        return json.loads(res.read())


@pytest.fixture(params=["sync", "async"])
def S(request):
    """The client's Sandbox class: e2b.Sandbox or e2b.AsyncSandbox."""
    return Sandbox if request.param == "sync" else AsyncSandbox


@pytest.fixture
async def sbx(S):
    """A sandbox of base for one test, killed after it."""
    s = await aw(S.create(metadata={"suite": "compat-py", "run": RUN}))
    yield s
    await aw(s.kill())


def fetch(url, timeout=10):
    """(status, body) of a GET; (None, the error) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


async def served(url, timeout=60.0):
    """Waits until url answers 200; returns its body (None: it did not)."""
    got = {}

    def ok():
        got["r"] = fetch(url)
        return got["r"][0] == 200

    if await wait_until(ok, timeout):
        return got["r"][1]
    return None


# A web server keeping a count in memory, on 127.0.0.1:8000.
COUNTER_SERVER = '''python3 -c "
import http.server
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        b = str(n).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 8000), H).serve_forever()"'''

# A shell counting in /tmp/count, 20 times a second.
COUNTER = "n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done"
