"""Volumes and their content API, and a sandbox's lifecycle events (which
the Python SDK has no call for: read through the API as E2B documents
them)."""

import os

import pytest
from e2b import AsyncSandbox, AsyncVolume, Sandbox, Volume

from conftest import RUN, api_get, aw, wait_until


def volume_of(S):
    return Volume if S is Sandbox else AsyncVolume


@pytest.fixture(autouse=True)
def volume_api(monkeypatch):
    # The volume content API is the same server (the SDK would go to
    # https://api.<domain> otherwise).
    monkeypatch.setenv("E2B_VOLUME_API_URL", os.environ["E2B_API_URL"])


async def test_volumes_written_mounted_and_kept(S):
    V = volume_of(S)
    vol = await aw(V.create(f"py-vol-{RUN}-{S.__name__.lower()}"))
    try:
        await aw(vol.write_file("/seed.txt", "from the API"))
        with pytest.raises(Exception):
            await aw(vol.write_file("/seed.txt", "again"))  # 409 without force
        await aw(vol.write_file("/seed.txt", "from the API", force=True))
        await aw(vol.make_dir("/a/b", force=True))
        a = await aw(S.create(volume_mounts={"/mnt/data": vol}))
        b = await aw(S.create(volume_mounts={"/data": vol.name}))
        try:
            assert (await aw(a.commands.run("cat /mnt/data/seed.txt"))).stdout == "from the API"
            await aw(a.commands.run("echo shared > /mnt/data/a/b/f.txt"))
            assert (await aw(b.commands.run("cat /data/a/b/f.txt; stat -c %U /data/a/b/f.txt"))).stdout == "shared\nuser\n"
            assert (await aw(a.get_info())).volume_mounts == [{"name": vol.name, "path": "/mnt/data"}]
        finally:
            await aw(a.kill())
            await aw(b.kill())
        assert await aw(vol.read_file("/a/b/f.txt")) == "shared\n"
        entries = await aw(vol.list("/", depth=3))
        assert any(e.path == "/a/b/f.txt" and e.uid == 1000 for e in entries), entries
        await aw(vol.update_metadata("/seed.txt", mode=0o600))
        assert (await aw(vol.get_info("/seed.txt"))).mode & 0o777 == 0o600
        await aw(vol.remove("/a"))
        assert await aw(vol.exists("/a")) is False
        assert any(v.volume_id == vol.volume_id for v in await aw(V.list()))
    finally:
        assert await aw(V.destroy(vol.volume_id)) is True
    assert await aw(V.destroy(vol.volume_id)) is False


async def test_lifecycle_events_of_a_sandbox(S):
    s = await aw(S.create(timeout=60))
    await aw(s.pause())
    await aw(S.connect(s.sandbox_id))
    await aw(s.kill())
    want = ["sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"]
    got = []

    def seen():
        got[:] = [e["type"] for e in api_get(f"/events/sandboxes/{s.sandbox_id}?orderAsc=true")]
        return all(w in got for w in want)

    assert await wait_until(seen, 20), got
    assert got.index("sandbox.lifecycle.created") < got.index("sandbox.lifecycle.paused") < got.index("sandbox.lifecycle.killed")
