"""Network and secrets: Secret's calls, rules that put a secret into
HTTPS requests, allow_out/deny_out, allow_internet_access,
update_network, and upstream SOCKS5 proxies, plain and over TLS (py
2.57).

egress_test.go starts the server with a fake internet: an upstream at
COMPAT_UPSTREAM that answers "<host> auth=v1|v2|none|other" (which
secret value its Authorization header carried), a SOCKS5 proxy at
COMPAT_SOCKS and one over TLS at COMPAT_SOCKS_TLS whose certificate, for
socks.upstream.test, is of the CA in COMPAT_CA_FILE.
"""

import os

import pytest
from e2b import AsyncSecret, Sandbox, SandboxException, Secret, SecretException

from conftest import API_KEY, API_URL, RUN, aw

V1 = os.environ["COMPAT_SECRET_V1"]
V2 = os.environ["COMPAT_SECRET_V2"]
UPSTREAM = os.environ["COMPAT_UPSTREAM"]
SOCKS = {"address": os.environ["COMPAT_SOCKS"], "username": os.environ["COMPAT_SOCKS_USER"], "password": os.environ["COMPAT_SOCKS_PASS"]}
SOCKS_TLS = os.environ["COMPAT_SOCKS_TLS"]
with open(os.environ["COMPAT_CA_FILE"]) as f:
    CA = f.read()


def secret_of(S):
    return Secret if S is Sandbox else AsyncSecret


async def curl(sbx, host, insecure=False):
    k = "-k " if insecure else ""
    r = await aw(sbx.commands.run(f"curl -sS -m 10 {k}--resolve {host}:443:{UPSTREAM} https://{host}/ 2>&1 || true"))
    return r.stdout.strip()


@pytest.fixture
async def secret(S):
    """A secret of the variant's own holding V1, destroyed after."""
    Sec = secret_of(S)
    name = f"py-token-{RUN}-{S.__name__.lower()}"
    info = await aw(Sec.create(name, V1, metadata={"owner": "compat-py"}))
    yield info
    await aw(Sec.destroy(info.secret_id))


async def test_secrets_create_read_list_update_destroy(S, secret):
    Sec = secret_of(S)
    assert secret.secret_id.startswith("sec_")
    assert secret.version == 1
    assert secret.metadata == {"owner": "compat-py"}
    assert secret.created_at.tzinfo is not None
    assert (await aw(Sec.get_info(secret.name.upper()))).secret_id == secret.secret_id  # names are lower-cased
    with pytest.raises(SecretException, match="exists"):
        await aw(Sec.create(secret.name, "again"))
    b = await aw(Sec.create(secret.name + "-b", "another value"))
    seen = []
    pages = Sec.list(limit=1)
    while pages.has_next:
        seen += [s.name for s in await aw(pages.next_items())]
    assert [n for n in seen if n.startswith(secret.name)] == [secret.name, secret.name + "-b"]
    import urllib.request

    for path in ["/secrets", f"/secrets/{secret.secret_id}"]:
        req = urllib.request.Request(API_URL + path, headers={"X-API-Key": API_KEY})
        assert V1 not in urllib.request.urlopen(req).read().decode(), path
    assert (await aw(Sec.update(b.secret_id, "newer"))).version == 2
    assert await aw(Sec.exists(b.secret_id)) is True
    assert await aw(Sec.destroy(b.secret_id)) is True
    assert await aw(Sec.destroy(b.secret_id)) is False
    assert await aw(Sec.exists(secret.name + "-b")) is False


async def test_rules_put_the_secret_into_https_requests(S, secret):
    Sec = secret_of(S)
    rules = {"api.upstream.test": [{"transform": {"headers": {"Authorization": f"Bearer {Sec.fill(secret.name)}"}}}]}
    sbx = await aw(S.create(network={"allow_out": ["*.upstream.test"], "deny_out": ["0.0.0.0/0"], "rules": rules}))
    try:
        assert await curl(sbx, "api.upstream.test") == "api.upstream.test auth=v1"
        assert await curl(sbx, "other.upstream.test", True) == "other.upstream.test auth=none"
        assert (await aw(Sec.update(secret.name, V2))).version == 2
        assert await curl(sbx, "api.upstream.test") == "api.upstream.test auth=v2"
        # update_network replaces the whole configuration.
        await aw(sbx.update_network({"allow_out": ["*.upstream.test"], "deny_out": ["0.0.0.0/0"]}))
        assert await curl(sbx, "api.upstream.test", True) == "api.upstream.test auth=none"
        await aw(sbx.update_network({"allow_out": ["other.upstream.test"], "deny_out": ["0.0.0.0/0"], "rules": rules}))
        assert "auth=" not in await curl(sbx, "api.upstream.test")
        info = await aw(sbx.get_info())
        assert info.network["allow_out"] == ["other.upstream.test"]
        assert info.network["deny_out"] == ["0.0.0.0/0"]
    finally:
        await aw(sbx.kill())
    with pytest.raises(SandboxException, match="no-such-secret"):
        await aw(S.create(network={"rules": {"api.upstream.test": [{"transform": {"headers": {"A": Sec.fill("no-such-secret")}}}]}}))


async def test_allow_internet_access_and_deny_out(S):
    closed = await aw(S.create(allow_internet_access=False))
    try:
        assert "auth=" not in await curl(closed, "api.upstream.test", True)
        await aw(closed.update_network({"allow_internet_access": True}))
        assert await curl(closed, "api.upstream.test", True) == "api.upstream.test auth=none"
        await aw(closed.update_network({"deny_out": [UPSTREAM + "/32"]}))
        assert "auth=" not in await curl(closed, "api.upstream.test", True)
    finally:
        await aw(closed.kill())


async def test_an_upstream_socks5_proxy_plain_and_over_tls(S, secret):
    Sec = secret_of(S)
    rules = {"api.upstream.test": [{"transform": {"headers": {"Authorization": f"Bearer {Sec.fill(secret.name)}"}}}]}
    sbx = await aw(S.create(network={"egress_proxy": SOCKS, "allow_out": ["api.upstream.test"], "deny_out": ["0.0.0.0/0"], "rules": rules}))
    try:
        assert await curl(sbx, "api.upstream.test") == "api.upstream.test auth=v1"
        info = await aw(sbx.get_info())
        assert info.network["egress_proxy"] == {"address": SOCKS["address"], "username": SOCKS["username"]}
        # Over TLS: the proxy's certificate verified with the CA given.
        over_tls = dict(SOCKS, address=SOCKS_TLS, tls={"server_name": "socks.upstream.test", "ca_cert": CA})
        await aw(sbx.update_network({"egress_proxy": over_tls, "allow_out": ["api.upstream.test"], "deny_out": ["0.0.0.0/0"], "rules": rules}))
        assert await curl(sbx, "api.upstream.test") == "api.upstream.test auth=v1"
        info = await aw(sbx.get_info())
        assert info.network["egress_proxy"] == {"address": SOCKS_TLS, "username": SOCKS["username"], "tls": {"server_name": "socks.upstream.test"}}
        # Without that CA the proxy is not trusted: nothing goes through.
        await aw(sbx.update_network({"egress_proxy": dict(over_tls, tls=True), "allow_out": ["api.upstream.test"], "deny_out": ["0.0.0.0/0"]}))
        assert "auth=" not in await curl(sbx, "api.upstream.test", True)
    finally:
        await aw(sbx.kill())
    with pytest.raises(SandboxException, match="caCert"):
        await aw(S.create(network={"egress_proxy": dict(SOCKS, tls={"ca_cert": "not a certificate"})}))
    with pytest.raises(SandboxException, match="egressProxy"):
        await aw(S.create(network={"egress_proxy": {"address": "127.0.0.1:1080"}}))
