"""Templates through the Python SDK's Template builder: Template.build
and build_in_background with runCmd, copy, envs, workdir, user, start and
ready commands; the cache; a failing step; exists."""

import pytest
from e2b import AsyncTemplate, Sandbox, Template, wait_for_file

from conftest import RUN, aw


def template_of(S):
    return Template if S is Sandbox else AsyncTemplate


def app(T, context):
    return (
        T(file_context_path=str(context))
        .from_template("base")
        .set_user("root")
        .run_cmd("mkdir -p /opt/app && echo built > /opt/app/built.txt")
        .copy("hello.txt", "/opt/app/hello.txt", user="user", mode=0o640)
        .copy("lib", "/opt/app/lib")
        .set_envs({"APP_MODE": "compat-py"})
        .set_workdir("/opt/app")
        .set_user("user")
        .set_start_cmd("sleep 0.2; touch /tmp/started; sleep 1000", wait_for_file("/tmp/started"))
    )


@pytest.fixture
def context(tmp_path):
    (tmp_path / "hello.txt").write_text("from the context\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.py").write_text("A = 1\n")
    return tmp_path


async def test_template_build_and_sandboxes_from_it(S, context):
    T = template_of(S)
    name = f"py-tpl-{RUN}-{S.__name__.lower()}"
    logs = []
    info = await aw(T.build(app(T, context), name, on_build_logs=lambda e: logs.append(e.message)))
    assert info.template_id
    assert "build ready" in logs, logs
    assert await aw(T.exists(name)) is True
    assert await aw(T.exists("no-such-template-" + RUN)) is False
    s = await aw(S.create(name))
    try:
        r = await aw(s.commands.run("cat built.txt hello.txt lib/a.py; echo $APP_MODE; whoami; pwd; test -f /tmp/started && echo started; stat -c %a hello.txt"))
        assert r.stdout == "built\nfrom the context\nA = 1\ncompat-py\nuser\n/opt/app\nstarted\n640\n"
    finally:
        await aw(s.kill())
    # Again: every step from the cache.
    again = []
    await aw(T.build(app(T, context), name, on_build_logs=lambda e: again.append(e.message)))
    assert len([m for m in again if m.startswith("CACHED")]) >= 8, again


async def test_a_failing_step_fails_the_build(S):
    T = template_of(S)
    broken = T().from_template("base").run_cmd("echo before; exit 3")
    with pytest.raises(Exception, match="exit code 3"):
        await aw(T.build(broken, f"py-broken-{RUN}-{S.__name__.lower()}"))


async def test_build_in_background_and_its_status(S):
    T = template_of(S)
    b = await aw(T.build_in_background(T().from_template("base").run_cmd("echo bg > /tmp/bg"), f"py-bg-{RUN}-{S.__name__.lower()}"))
    import asyncio

    for _ in range(600):
        status = await aw(T.get_build_status(b))
        if str(status.status.value) in ("ready", "error"):
            break
        await asyncio.sleep(0.1)
    assert str(status.status.value) == "ready", status


async def test_a_long_log_is_paged_through_whole(S):
    # The server answers at most 100 entries a poll: the SDK pages through
    # the rest, the tail after the build ended too.
    T = template_of(S)
    logs = []
    name = f"py-paged-{RUN}-{S.__name__.lower()}"
    step = f"seq 1 450 # {name}"  # never from the step cache
    await aw(T.build(T().from_template("base").run_cmd(step), name, on_build_logs=lambda e: logs.append(e.message)))
    numbers = [int(m) for m in logs if m.isdigit()]
    assert numbers == list(range(1, 451)), len(logs)
    assert "build ready" in logs, logs[-5:]
