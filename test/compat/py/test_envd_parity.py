"""Where E2B's own suite counts on what its agent and API do: a timeout of
0 ends a sandbox now (set_timeout(0)), a watcher sees the events of envd's
writes, and a killed process or terminal is gone when kill() returns."""

import pytest
from e2b import CommandExitException, FilesystemEventType, NotFoundException, PtySize, SandboxState

from conftest import RUN, aw, wait_until


async def test_set_timeout_zero_pauses_with_memory(S):
    # E2B's test_keep_memory_none_defaults_to_full_memory: keep_memory None
    # is a pause with memory, and set_timeout(0) forces the timeout's pause.
    s = await aw(
        S.create(
            timeout=60,
            metadata={"suite": "compat-py", "run": RUN},
            lifecycle={"on_timeout": {"action": "pause", "keep_memory": None}},
        )
    )
    try:
        boot = (await aw(s.files.read("/proc/sys/kernel/random/boot_id"))).strip()
        assert len(boot) == 36, boot  # read whole: /proc tells no size
        h = await aw(s.commands.run("sleep 1000", background=True))
        await aw(s.set_timeout(0))
        # Cove answers once the pause is done (E2B's may answer before).
        assert await aw(s.is_running()) is False
        assert (await aw(S.get_info(s.sandbox_id))).state == SandboxState.PAUSED
        back = await aw(s.connect())
        assert back.sandbox_id == s.sandbox_id
        assert (await aw(back.files.read("/proc/sys/kernel/random/boot_id"))).strip() == boot
        await aw(back.commands.run(f"kill -0 {h.pid}"))  # its process lives on: memory kept
    finally:
        await aw(s.kill())


async def test_set_timeout_zero_kills_without_auto_pause(S):
    s = await aw(S.create(timeout=60, metadata={"suite": "compat-py", "run": RUN}))
    try:
        await aw(s.set_timeout(0))
        assert await aw(s.is_running()) is False
        with pytest.raises(NotFoundException):
            await aw(S.get_info(s.sandbox_id))
    finally:
        await aw(s.kill())


class _Watch:
    """A watch of one directory through the sync or async SDK; names()
    gives the events up to a mark (a directory made after what is watched:
    the kernel reports in order), as TYPE:name, the marks' left out."""

    def __init__(self, S, sbx, path, recursive=False):
        self.S, self.sbx, self.path, self.recursive = S, sbx, path, recursive
        self.events, self.marks = [], 0

    async def __aenter__(self):
        if self.S.__name__ == "Sandbox":
            self.w = self.sbx.files.watch_dir(self.path, recursive=self.recursive)
        else:
            self.w = await self.sbx.files.watch_dir(self.path, self.events.append, recursive=self.recursive)
        return self

    async def __aexit__(self, *exc):
        await aw(self.w.stop())

    async def names(self):
        self.marks += 1
        mark = f"mark-{self.marks}"
        await aw(self.sbx.files.make_dir(f"{self.path}/{mark}"))

        def seen():
            if self.S.__name__ == "Sandbox":
                self.events.extend(self.w.get_new_events())
            return any(e.name == mark for e in self.events)

        assert await wait_until(seen, 30), self.events
        i = next(i for i, e in enumerate(self.events) if e.name == mark)
        got = self.events[:i]
        del self.events[: i + 1]  # in place: the async watch appends to it
        # A mark's other events (MakeDir gives it to the user: a CHMOD).
        return [f"{e.type.name}:{e.name}" for e in got if not e.name.startswith("mark-")]


@pytest.mark.parametrize("octet", [False, True], ids=["multipart", "octet-stream"])
async def test_watch_sees_envds_write_events(S, sbx, octet):
    # E2B's test_watch_iterated and test_watch_directory_changes: a new
    # file's write is CREATE, CHMOD, WRITE; an overwrite has no CREATE.
    d = "/home/user/watched-parity"
    await aw(sbx.files.make_dir(d))
    async with _Watch(S, sbx, d) as w:
        await aw(sbx.files.write(f"{d}/f.txt", "This file will be watched.", use_octet_stream=octet))
        assert await w.names() == ["CREATE:f.txt", "CHMOD:f.txt", "WRITE:f.txt"]
        await aw(sbx.files.write(f"{d}/f.txt", "This file has been modified.", use_octet_stream=octet))
        got = await w.names()
        assert got in (["CHMOD:f.txt", "WRITE:f.txt"], ["CHMOD:f.txt", "WRITE:f.txt", "WRITE:f.txt"]), got
    assert FilesystemEventType.CHMOD.name == "CHMOD"


async def test_watch_recursive_counts_envds_events(S, sbx):
    # E2B's test_watch_recursive_directory_changes.
    d = "/home/user/watched-recursive"
    await aw(sbx.files.make_dir(f"{d}/nested"))
    async with _Watch(S, sbx, d, recursive=True) as w:
        await aw(sbx.files.write(f"{d}/nested/f.txt", "x"))
        assert await w.names() == ["CREATE:nested/f.txt", "CHMOD:nested/f.txt", "WRITE:nested/f.txt"]


async def _gone(sbx, pid):
    """Whether pid is gone at once: kill -0 fails and commands.list()
    does not show it."""
    with pytest.raises(CommandExitException):
        await aw(sbx.commands.run(f"kill -0 {pid}"))
    assert pid not in [p.pid for p in await aw(sbx.commands.list())]


async def test_kill_then_check(S, sbx):
    # Every CPU the sandbox has kept busy beside: a killed process must be
    # reaped, not only signalled, when kill() returns.
    await aw(sbx.commands.run("for i in 1 2 3 4; do (while :; do :; done) & done; wait", background=True))
    for i in range(8):
        h = await aw(sbx.commands.run("sleep 1000 & sleep 1000", background=True))
        if i % 2:
            assert await aw(sbx.commands.kill(h.pid)) is True
        else:
            assert await aw(h.kill()) is True
        await _gone(sbx, h.pid)
    out = bytearray()
    for _ in range(4):
        if S.__name__ == "Sandbox":
            t = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
        else:
            t = await sbx.pty.create(PtySize(rows=24, cols=80), on_data=out.extend, timeout=60)
        assert await aw(sbx.pty.kill(t.pid)) is True
        await _gone(sbx, t.pid)
