"""HTTPS to a sandbox's port, at https://{get_host(port)}, verifies for a
client that trusts the server's local CA (COMPAT_CA_FILE, its data
directory's tls/ca.pem): Python's ssl (OpenSSL), curl and Node, in the
default mode (8080-<id>.localhost:<port>, for which a certificate naming
*.localhost is refused) and in E2B's domain mode (python_test.go runs it
with E2B_DOMAIN=localhost:<port> too, the SDK itself over HTTPS, and
domain_test.go under cove.localhost)."""

import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request

from conftest import aw

CA_FILE = os.environ["COMPAT_CA_FILE"]
BODY = "served over https\n"

# Fetches argv[1]; prints the body, fails on an error or a status but 200.
NODE_GET = """
require('https').get(process.argv[1], (res) => {
  let body = ''
  res.on('data', (d) => { body += d })
  res.on('end', () => { process.stdout.write(body); process.exit(res.statusCode === 200 ? 0 : 1) })
}).on('error', (e) => { console.error(String(e)); process.exit(1) })
"""


async def test_https_to_a_port_verifies(sbx):
    await aw(sbx.files.write("/tmp/www/index.txt", BODY))
    await aw(sbx.commands.run("python3 -m http.server 8080 --bind 127.0.0.1 --directory /tmp/www", background=True))
    # Listening: then a single fetch, whose verification error is the answer.
    await aw(sbx.commands.run("timeout 30 bash -c 'until (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; do sleep 0.05; done'"))
    url = f"https://{sbx.get_host(8080)}/index.txt"

    ctx = ssl.create_default_context(cafile=CA_FILE)
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=30) as res:
            assert (res.status, res.read().decode()) == (200, BODY)
    except urllib.error.URLError as e:
        raise AssertionError(f"{url} with Python's ssl: {e.reason}") from e

    if shutil.which("curl"):
        got = subprocess.run(["curl", "-sS", "--fail", "--max-time", "30", "--cacert", CA_FILE, url],
                             capture_output=True, text=True, timeout=60)
        assert (got.returncode, got.stdout) == (0, BODY), f"curl {url}: {got.stderr}"
    if shutil.which("node"):
        got = subprocess.run(["node", "-e", NODE_GET, url], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "NODE_EXTRA_CA_CERTS": CA_FILE})
        assert (got.returncode, got.stdout) == (0, BODY), f"node {url}: {got.stderr}"
