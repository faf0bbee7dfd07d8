"""Pause and resume with and without memory, auto-pause and auto-resume,
snapshots and fork."""

import asyncio

import pytest
from e2b import NotFoundException, SandboxQuery, SandboxState

from conftest import COPIES_PROCESSES, COUNTER, COUNTER_SERVER, RUN, aw, fetch, served, wait_until


async def _count(s):
    return int((await aw(s.commands.run("cat /tmp/count"))).stdout)


async def _state(S, sid):
    return (await aw(S.get_info(sid))).state


async def test_pause_and_connect_keep_processes(S):
    tag = {"pause": RUN + S.__name__}
    s = await aw(S.create(metadata=tag))
    try:
        await aw(s.commands.run(COUNTER, background=True))
        await aw(s.commands.run("cd /tmp && python3 -m http.server 8082 --bind 127.0.0.1", background=True))
        url = f"http://{s.get_host(8082)}/count"
        assert await served(url) is not None
        before = await _count(s)
        assert await aw(s.pause()) is True
        assert await aw(s.pause()) is False  # 409: paused already
        assert await aw(s.is_running()) is False
        assert await _state(S, s.sandbox_id) == SandboxState.PAUSED
        paused = await aw(S.list(query=SandboxQuery(state=[SandboxState.PAUSED], metadata=tag)).next_items())
        assert [x.sandbox_id for x in paused] == [s.sandbox_id]
        await asyncio.sleep(1.5)  # 30 counts if it were not frozen
        back = await aw(S.connect(s.sandbox_id))
        assert await _state(S, back.sandbox_id) == SandboxState.RUNNING
        after = await _count(back)
        assert before <= after < before + 20, (before, after)
        assert await wait_until(lambda: _gt(_count(back), after)), "the counter stopped"
        assert fetch(url)[0] == 200
    finally:
        await aw(s.kill())


async def _gt(value, than):
    return await aw(value) > than


async def test_pause_without_memory_and_reboot(S):
    s = await aw(S.create())
    try:
        await aw(s.commands.run("mkdir -p /srv/app && echo kept > /srv/app/state", user="root"))
        await aw(s.commands.run("sleep 1000", background=True))
        assert await aw(s.pause(mode="filesystem")) is True
        assert await aw(s.pause(mode="filesystem")) is False
        assert await _state(S, s.sandbox_id) == SandboxState.PAUSED
        back = await aw(S.connect(s.sandbox_id))
        assert back.sandbox_id == s.sandbox_id
        # The same token: the old handle still talks to it; a fresh boot.
        assert (await aw(s.commands.run("cat /srv/app/state; pgrep -x sleep || echo none"))).stdout == "kept\nnone\n"
        # Paused with its memory, brought back with on_resume="reboot".
        await aw(s.commands.run("sleep 1000", background=True))
        assert await aw(s.pause(keep_memory=True)) is True
        await aw(S.connect(s.sandbox_id, on_resume="reboot"))
        assert (await aw(s.commands.run("cat /srv/app/state; pgrep -x sleep || echo none"))).stdout == "kept\nnone\n"
    finally:
        await aw(s.kill())


async def test_auto_pause_at_the_timeout_and_auto_resume(S):
    auto = await aw(S.create(timeout=3, lifecycle={"on_timeout": "pause", "auto_resume": True}))
    manual = await aw(S.create(timeout=3, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}}))
    try:
        for s in (auto, manual):
            await aw(s.files.write("/tmp/w.txt", "woke\n"))
        await aw(auto.commands.run("cd /tmp && python3 -m http.server 8083 --bind 127.0.0.1", background=True))
        assert await served(f"http://{auto.get_host(8083)}/w.txt") == "woke\n"
        for s in (auto, manual):
            assert await wait_until(lambda: _is(_state(S, s.sandbox_id), SandboxState.PAUSED), 30), "not paused at its timeout"
        info = await aw(auto.get_info())
        assert info.lifecycle == {"on_timeout": "pause", "auto_resume": True}
        # Traffic wakes the auto-resuming one: the request waits, then succeeds.
        assert fetch(f"http://{auto.get_host(8083)}/w.txt", timeout=60) == (200, "woke\n")
        assert await _state(S, auto.sandbox_id) == SandboxState.RUNNING
        # The other, paused without memory, comes back by connect with its files.
        assert await _state(S, manual.sandbox_id) == SandboxState.PAUSED
        await aw(S.connect(manual.sandbox_id, timeout=60))
        assert await aw(manual.files.read("/tmp/w.txt")) == "woke\n"
    finally:
        await aw(auto.kill())
        await aw(manual.kill())


async def _is(value, want):
    return await aw(value) == want


async def test_snapshots_listed_created_from_and_deleted(S):
    s = await aw(S.create(envs={"FROM": "parent"}))
    try:
        await aw(s.commands.run("mkdir -p /srv/app && echo v1 > /srv/app/state", user="root"))
        await aw(s.commands.run(COUNTER, background=True))
        assert await wait_until(lambda: _gt(_count(s), 0))
        name = f"snap-{RUN}-{S.__name__.lower()}"
        snap = await aw(s.create_snapshot(name=name))
        assert snap.snapshot_id == f"{name}:default"
        assert snap.names == [f"{name}:default"]
        await aw(s.commands.run("echo v2 > /srv/app/state", user="root"))
        files_only = await aw(S.create_snapshot(s.sandbox_id, mode="filesystem"))
        mine = S.list_snapshots(sandbox_id=s.sandbox_id, limit=1)
        got = []
        while mine.has_next:
            got += [x.snapshot_id for x in await aw(mine.next_items())]
        assert sorted(got) == sorted([snap.snapshot_id, files_only.snapshot_id])
        c = await aw(S.create(snap.snapshot_id))
        try:
            assert (await aw(c.commands.run("cat /srv/app/state; echo $FROM"))).stdout == "v1\nparent\n"
            c1 = await _count(c)
            if COPIES_PROCESSES:
                assert await wait_until(lambda: _gt(_count(c), c1)), "the snapshot's counter does not run on"
            else:
                await asyncio.sleep(0.3)
                assert await _count(c) == c1, "a process runs in a sandbox from a snapshot of files"
        finally:
            await aw(c.kill())
        c = await aw(S.create(files_only.snapshot_id))
        try:
            # Files only, whatever the driver: the counter does not run on.
            assert (await aw(c.commands.run("cat /srv/app/state"))).stdout == "v2\n"
            c1 = await _count(c)
            await asyncio.sleep(0.3)
            assert await _count(c) == c1, "a process runs in a sandbox from a snapshot of files"
        finally:
            await aw(c.kill())
        assert await aw(S.delete_snapshot(snap.snapshot_id)) is True
        assert await aw(S.delete_snapshot(snap.snapshot_id)) is False
        assert await aw(S.delete_snapshot(files_only.snapshot_id)) is True
        assert await aw(S.list_snapshots(sandbox_id=s.sandbox_id).next_items()) == []
    finally:
        await aw(s.kill())
    with pytest.raises(NotFoundException):
        await aw(S.create_snapshot(s.sandbox_id))


async def test_fork(S):
    s = await aw(S.create(envs={"FROM": "parent"}))
    try:
        await aw(s.files.write("/home/user/notes.txt", "forked"))
        await aw(s.commands.run(COUNTER_SERVER, background=True))
        assert await served(f"http://{s.get_host(8000)}/") == "1"
        kids = await aw(s.fork(count=2, timeout=60))
        assert len(kids) == 2
        try:
            for k in kids:
                assert isinstance(k, S), k
                assert k.sandbox_id != s.sandbox_id
                assert await aw(k.files.read("/home/user/notes.txt")) == "forked"
                r = await aw(k.commands.run("echo $FROM; whoami; echo $E2B_SANDBOX_ID"))
                assert r.stdout == f"parent\nuser\n{k.sandbox_id}\n"
                if COPIES_PROCESSES:
                    assert await served(f"http://{k.get_host(8000)}/") == "2"
                else:
                    assert await served(f"http://{k.get_host(8000)}/", 1) is None
            await aw(kids[0].files.write("/home/user/notes.txt", "mine"))
            assert await aw(kids[1].files.read("/home/user/notes.txt")) == "forked"
            assert await aw(s.files.read("/home/user/notes.txt")) == "forked"
        finally:
            for k in kids:
                if isinstance(k, S):
                    await aw(k.kill())
        assert await aw(s.is_running()) is True
        assert await served(f"http://{s.get_host(8000)}/") == "2"
    finally:
        await aw(s.kill())
    with pytest.raises(NotFoundException):
        await aw(S.fork(s.sandbox_id))
