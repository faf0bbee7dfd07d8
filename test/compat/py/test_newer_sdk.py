"""What the SDKs added up to 2.66 that Cove serves: a strict pause, the
mark of a sandbox paused while its agent did not answer, the lifecycle a
create leaves to the server, a sandbox's own resolvers (dnsServers).

The agent is stopped from the host (this suite runs as root beside the
server): inside its sandbox the agent is PID 1, whom no signal of the
sandbox's own stops. On namespaces it is a process of the host's, stopped
with SIGSTOP; on gVisor it lives in the sentry, which `runsc kill <id>
STOP` asks to stop it.
"""

import os
import signal
import subprocess

import pytest
from e2b import GuestUnresponsiveException, SandboxState, ServiceBusyException

from conftest import RUN, aw, wait_until


def _procs():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            yield int(pid)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def stop_agent(sandbox_id):
    """Stops a sandbox's agent from the host: on gVisor with runsc's kill
    of the container's init (the sentry delivers it), on namespaces with
    SIGSTOP to the process that is PID 1 of the sandbox's pid namespace."""
    for pid in _procs():
        argv = _read(f"/proc/{pid}/cmdline").split(b"\0")
        if argv[0] != b"runsc-sandbox" or sandbox_id.encode() not in argv:
            continue
        root = next(a for a in argv if a.startswith(b"--root=")).decode().removeprefix("--root=")
        runsc = os.readlink(f"/proc/{pid}/exe")
        subprocess.run([runsc, "--root", root, "kill", sandbox_id, "STOP"], check=True, timeout=60, capture_output=True)
        return
    for pid in _procs():
        if sandbox_id.encode() not in _read(f"/proc/{pid}/cgroup"):
            continue
        for line in _read(f"/proc/{pid}/status").decode().splitlines():
            # The sandbox's PID 1, as its own pid namespace numbers it.
            if line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2:
                os.kill(pid, signal.SIGSTOP)
                return
    raise AssertionError(f"no agent of {sandbox_id} found on this host")


async def _not_answering(s):
    try:
        return not await aw(s.is_running(request_timeout=2))
    except Exception:  # noqa: BLE001 - its health check timed out: no answer
        return True


async def test_strict_pause_and_a_sandbox_paused_unresponsive(S):
    s = await aw(S.create(metadata={"suite": "compat-py", "run": RUN}))
    try:
        await aw(s.files.write("/home/user/kept", "kept\n"))
        stop_agent(s.sandbox_id)
        assert await wait_until(lambda: _not_answering(s), 60), "the agent still answers"
        # Strict: refused as E2B's busy error, and the sandbox runs on.
        with pytest.raises(ServiceBusyException):
            await aw(s.pause(strict=True, retries=0))
        info = await aw(s.get_info())
        assert info.state == SandboxState.RUNNING
        assert info.envd_unresponsive_at_pause is None
        # Not strict: paused all the same, and marked.
        assert await aw(s.pause()) is True
        info = await aw(s.get_info())
        assert info.state == SandboxState.PAUSED
        assert info.envd_unresponsive_at_pause is True
        # Its memory would bring the stopped agent back.
        with pytest.raises(GuestUnresponsiveException):
            await aw(S.connect(s.sandbox_id))
        assert (await aw(s.get_info())).state == SandboxState.PAUSED
        # Booted afresh over its files, it answers again.
        back = await aw(S.connect(s.sandbox_id, on_resume="reboot"))
        info = await aw(back.get_info())
        assert info.state == SandboxState.RUNNING
        assert info.envd_unresponsive_at_pause is None
        assert await aw(back.files.read("/home/user/kept")) == "kept\n"
        assert (await aw(back.commands.run("echo up"))).stdout == "up\n"
    finally:
        await aw(s.kill())


async def test_a_strict_pause_of_an_answering_sandbox_pauses_it(S):
    s = await aw(S.create(metadata={"suite": "compat-py", "run": RUN}))
    try:
        assert await aw(s.pause(strict=True)) is True
        info = await aw(s.get_info())
        assert info.state == SandboxState.PAUSED
        assert info.envd_unresponsive_at_pause is None
        await aw(S.connect(s.sandbox_id))
        assert (await aw(s.commands.run("echo up"))).stdout == "up\n"
    finally:
        await aw(s.kill())


async def test_a_lifecycle_left_out_keeps_the_servers_defaults(S):
    # Since 2.42 the SDK sends no autoPause, autoPauseMemory or autoResume
    # it was not given: absence is the server's default, not false.
    plain = await aw(S.create(metadata={"suite": "compat-py", "run": RUN}))
    paused = await aw(S.create(metadata={"suite": "compat-py", "run": RUN}, lifecycle={"on_timeout": "pause"}))
    try:
        assert (await aw(plain.get_info())).lifecycle == {"on_timeout": "kill", "auto_resume": False}
        assert (await aw(paused.get_info())).lifecycle == {"on_timeout": "pause", "auto_resume": False}
    finally:
        await aw(plain.kill())
        await aw(paused.kill())


# A resolver of the tenant's own in the fake internet (TestEgress's run,
# whose server gives sandboxes a network): it answers only.mine.test.
DNS = os.environ.get("COMPAT_DNS")


@pytest.mark.skipif(not DNS, reason="needs sandboxes with a network and a resolver of their own (TestEgress runs it)")
async def test_dns_servers_name_the_sandboxs_resolvers(S):
    s = await aw(S.create(metadata={"suite": "compat-py", "run": RUN}, network={"dns_servers": [DNS]}))
    try:
        assert (await aw(s.get_info())).network["dns_servers"] == [DNS]
        assert (await aw(s.commands.run("cat /etc/resolv.conf"))).stdout == f"nameserver {DNS}\n"
        lookup = "getent hosts only.mine.test | cut -d' ' -f1 || echo unresolved"
        assert (await aw(s.commands.run(lookup))).stdout == "203.0.113.77\n"
        # The egress rules apply to them: denied, no answer.
        await aw(s.update_network({"deny_out": [DNS + "/32"], "dns_servers": [DNS]}))
        assert (await aw(s.commands.run(lookup, timeout=60))).stdout.strip() in ("", "unresolved")
        await aw(s.update_network({"dns_servers": ["198.51.100.53", DNS]}))
        assert (await aw(s.get_info())).network["dns_servers"] == ["198.51.100.53", DNS]
        assert (await aw(s.commands.run("cat /etc/resolv.conf"))).stdout == f"nameserver 198.51.100.53\nnameserver {DNS}\n"
        # Left out of an update, they go: the node's resolvers again.
        await aw(s.update_network({}))
        assert "dns_servers" not in ((await aw(s.get_info())).network or {})
        assert DNS not in (await aw(s.commands.run("cat /etc/resolv.conf"))).stdout
    finally:
        await aw(s.kill())
