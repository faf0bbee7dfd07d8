"""Commands and terminals: run, background, callbacks, stdin (send_stdin
and stream_input), CommandExitError, timeouts, user, cwd; PTY create,
send_stdin, resize and kill."""

import time

import pytest
from e2b import CommandExitException, PtySize, TimeoutException

from conftest import aw, wait_until


async def test_stdout_stderr_and_exit_codes(sbx):
    r = await aw(sbx.commands.run("echo out; echo err >&2"))
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 0)
    with pytest.raises(CommandExitException) as e:
        await aw(sbx.commands.run("echo bad >&2; exit 7"))
    assert e.value.exit_code == 7
    assert e.value.stderr == "bad\n"


async def test_envs_cwd_user_and_callbacks(sbx):
    out, err = [], []
    r = await aw(
        sbx.commands.run(
            "echo $GREETING; pwd; whoami; echo oops >&2",
            envs={"GREETING": "hello"},
            cwd="/tmp",
            user="root",
            on_stdout=out.append,
            on_stderr=err.append,
        )
    )
    assert r.stdout == "hello\n/tmp\nroot\n"
    assert "".join(out) == r.stdout
    assert "".join(err) == "oops\n"
    d = await aw(sbx.commands.run("whoami; echo $HOME; pwd"))
    assert d.stdout == "user\n/home/user\n/home/user\n"
    n = await aw(sbx.commands.run('python3 -c "print(6*7)"'))
    assert n.stdout == "42\n"


async def test_a_timeout_ends_a_long_command(sbx):
    start = time.monotonic()
    with pytest.raises(TimeoutException):
        await aw(sbx.commands.run("sleep 30", timeout=0.5))
    assert time.monotonic() - start < 10

    async def gone():
        return not any("sleep 30" in " ".join(p.args or []) for p in await aw(sbx.commands.list()))

    assert await wait_until(gone, 5), "the timed-out command still runs"


async def test_background_connect_send_stdin_and_kill(S, sbx):
    h = await aw(sbx.commands.run("read line; echo got:$line; sleep 60", background=True, stdin=True))
    assert h.pid > 0
    assert any(p.pid == h.pid for p in await aw(sbx.commands.list()))
    seen = []
    if S.__name__ == "Sandbox":
        # The sync handle hands its output over as it is iterated.
        c = sbx.commands.connect(h.pid)
        sbx.commands.send_stdin(h.pid, "ping\n")
        for out, _, _ in c:
            seen.append(out or "")
            if "got:ping" in "".join(seen):
                break
    else:
        c = await sbx.commands.connect(h.pid, on_stdout=seen.append)
        await sbx.commands.send_stdin(h.pid, "ping\n")
        assert await wait_until(lambda: "got:ping" in "".join(seen), 30), seen
    assert "got:ping" in "".join(seen)
    assert await aw(sbx.commands.kill(h.pid)) is True
    with pytest.raises(CommandExitException):
        await aw(c.wait())
    assert await aw(sbx.commands.kill(999999)) is False


async def test_stdin_closed_and_streamed(S, sbx):
    h = await aw(sbx.commands.run("wc -c", background=True, stdin=True))
    await aw(sbx.commands.send_stdin(h.pid, "12345"))
    await aw(sbx.commands.close_stdin(h.pid))
    assert (await aw(h.wait())).stdout.strip() == "5"
    # stream_input: the sync client takes an iterable; the async one a
    # handle to send into and close.
    h = await aw(sbx.commands.run("cat", background=True, stdin=True))
    chunks = [f"line {i}\n" for i in range(50)]
    if S.__name__ == "Sandbox":
        sbx.commands.stream_input(h.pid, iter(chunks))
    else:
        inp = sbx.commands.stream_input(h.pid)
        for c in chunks:
            await inp.send(c)
        await inp.close()
    await aw(sbx.commands.close_stdin(h.pid))
    assert (await aw(h.wait())).stdout == "".join(chunks)


async def test_sudo_for_user_and_python_is_python3(sbx):
    r = await aw(sbx.commands.run("sudo id -u; sudo -u user id -un"))
    assert r.stdout == "0\nuser\n"
    r = await aw(sbx.commands.run('python -c "import sys; print(sys.version_info[0])"'))
    assert r.stdout == "3\n"


async def test_pty_create_send_stdin_resize_kill(S, sbx):
    out = bytearray()
    if S.__name__ == "Sandbox":
        # The sync handle hands its data over in wait(): the shell ends.
        t = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
        sbx.pty.resize(t.pid, PtySize(rows=30, cols=100))
        sbx.pty.send_stdin(t.pid, b"stty size; echo pty-$((6*7)); exit\n")
        t.wait(on_pty=out.extend)
    else:
        t = await sbx.pty.create(PtySize(rows=24, cols=80), on_data=out.extend, timeout=60)
        await sbx.pty.resize(t.pid, PtySize(rows=30, cols=100))
        await sbx.pty.send_stdin(t.pid, b"stty size; echo pty-$((6*7))\n")
        assert await wait_until(lambda: b"30 100" in out and b"pty-42" in out, 30), bytes(out)
        assert await sbx.pty.kill(t.pid) is True
    assert b"30 100" in out and b"pty-42" in out, bytes(out)


async def test_pty_sudo_stream_input_and_kill(S, sbx):
    out = bytearray()
    lines = [b"sudo -s\n", b"echo as-$(id -un)-$(tty | cut -c1-8)\n"]
    if S.__name__ == "Sandbox":
        t = sbx.pty.create(PtySize(rows=24, cols=80), timeout=60)
        sbx.pty.stream_input(t.pid, iter(lines))
        for _, _, data in t:  # the sync handle hands its data over as it is iterated
            out.extend(data or b"")
            if b"as-root-/dev/pts" in out:
                break
    else:
        t = await sbx.pty.create(PtySize(rows=24, cols=80), on_data=out.extend, timeout=60)
        inp = sbx.pty.stream_input(t.pid)
        await inp.send(lines[0])
        # The next line once root's shell reads: typed ahead, the user's
        # shell may read it before sudo starts one.
        assert await wait_until(lambda: b"root@" in out, 30), bytes(out)
        await inp.send(lines[1])
        await inp.close()
        assert await wait_until(lambda: b"as-root-/dev/pts" in out, 30), bytes(out)
    assert b"as-root-/dev/pts" in out, bytes(out)
    assert await aw(sbx.pty.kill(t.pid)) is True

    async def gone():  # a killed process is listed until its end is seen
        return not any(p.pid == t.pid for p in await aw(sbx.commands.list()))

    assert await wait_until(gone, 10), "the killed terminal is still listed"
    assert await aw(sbx.pty.kill(t.pid)) is False
