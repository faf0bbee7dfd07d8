"""The Python SDK's transport, as Cove serves it (docs/ARCHITECTURE.md):
its HTTP client (pyqwest, under httpx) speaks HTTP/1.1 to a plain-HTTP
server (E2B_API_URL and E2B_SANDBOX_URL, routing by the E2b-Sandbox-*
headers) and asks HTTP/2 by ALPN over TLS (E2B's domain mode:
api.<domain> and 49983-<id>.<domain>), but for file downloads; the agent's calls are Connect
with JSON, server-streaming (Start, Connect, WatchDir) and client-streaming
(StreamInput, which the JS SDK 2.51 never sends) alike. pyqwest logs each
request with its HTTP version on the pyqwest.access logger."""

import logging
import os
import re

import pytest

from conftest import aw

DOMAIN = os.environ.get("E2B_DOMAIN")


@pytest.fixture
def requests_seen():
    """The requests pyqwest makes while the test runs: (method, URL,
    HTTP version, status)."""
    seen = []

    class Handler(logging.Handler):
        def emit(self, record):
            m = re.match(r'HTTP Request: (\S+) (\S+) "HTTP/([0-9.]+) (\d+)', record.getMessage())
            if m:
                seen.append(m.groups())

    log = logging.getLogger("pyqwest.access")
    handler = Handler()
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.DEBUG)
    yield seen
    log.removeHandler(handler)
    log.setLevel(level)


async def test_every_call_on_the_version_the_sdk_asks(S, requests_seen):
    s = await aw(S.create())
    try:
        assert (await aw(s.commands.run("echo over-the-wire"))).stdout == "over-the-wire\n"
        h = await aw(s.commands.run("cat", background=True, stdin=True))
        if S.__name__ == "Sandbox":
            s.commands.stream_input(h.pid, iter(["streamed ", "in\n"]))
        else:
            inp = s.commands.stream_input(h.pid)
            await inp.send("streamed ")
            await inp.send("in\n")
            await inp.close()
        await aw(s.commands.close_stdin(h.pid))
        assert (await aw(h.wait())).stdout == "streamed in\n"
        await aw(s.files.write("/home/user/t.txt", "over the wire"))
        assert await aw(s.files.read("/home/user/t.txt")) == "over the wire"
    finally:
        await aw(s.kill())
    want = "2" if DOMAIN else "1.1"
    assert requests_seen, "pyqwest logged no request"

    def version(method, url):
        # File downloads go over HTTP/1.1 whatever was asked: the SDK pins
        # them (e2b/envd/api.py), as E2B's own proxy pads them with empty
        # frames that pyqwest's HTTP/2 refuses after a hundred.
        return "1.1" if method == "GET" and "/files?" in url else want

    assert [r for r in requests_seen if r[2] != version(r[0], r[1])] == [], requests_seen
    urls = [u for _, u, _, _ in requests_seen]
    paths = [re.sub(r"^https?://[^/]+", "", u) for u in urls]
    for rpc in ("/process.Process/Start", "/process.Process/StreamInput", "/files"):
        assert any(p.startswith(rpc) for p in paths), paths
    if DOMAIN:  # the agent by its host name, the API at api.<domain>
        assert any(u.startswith(f"https://49983-{s.sandbox_id}.{DOMAIN}/") for u in urls), urls
        assert any(u.startswith(f"https://api.{DOMAIN}/") for u in urls), urls
