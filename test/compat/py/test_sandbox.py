"""Sandboxes: create, info, list and its filters and pages, connect,
timeouts and kill."""

import datetime
import re

import pytest
from e2b import AuthenticationException, NotFoundException, SandboxException, SandboxQuery, SandboxState

from conftest import API_KEY, RUN, aw, wait_until


async def test_create_answers_with_an_id_a_token_and_the_envd_version(S):
    s = await aw(S.create(envs={"GREETING": "hi"}, metadata={"run": RUN}, timeout=120))
    try:
        assert re.fullmatch(r"i[a-z0-9]{19}", s.sandbox_id)
        # v2 sandboxes are secure: the SDK holds the agent's token.
        assert s._envd_access_token
        assert (await aw(s.commands.run("echo $GREETING"))).stdout == "hi\n"
        info = await aw(s.get_info())
        assert info.template_id == "base"
        assert info.name == "base"
        assert info.metadata == {"run": RUN}
        assert str(info.state.value) == "running"
        assert 115 <= (info.end_at - info.started_at).total_seconds() <= 121
        assert info.cpu_count >= 1 and info.memory_mb >= 128
    finally:
        await aw(s.kill())


async def test_secure_false_and_a_template_by_name(S):
    s = await aw(S.create("base", secure=False))
    try:
        assert (await aw(s.commands.run("whoami"))).stdout == "user\n"
    finally:
        await aw(s.kill())


async def test_list_filters_order_and_pages(S):
    tag = {"list": RUN + "-" + S.__name__}
    first = await aw(S.create(metadata=tag))
    second = await aw(S.create(metadata=tag))
    try:

        async def ids(**kw):
            query = kw.pop("query", {})
            q = SandboxQuery(metadata=query.pop("metadata", tag), **query)
            return [x.sandbox_id for x in await aw(S.list(query=q, **kw).next_items())]

        assert await ids() == [second.sandbox_id, first.sandbox_id]
        assert await ids(query={"metadata": {"list": "nothing-has-this"}}) == []
        assert await ids(query={"state": [SandboxState.PAUSED]}) == []
        assert await ids(query={"state": [SandboxState.RUNNING]}) == [second.sandbox_id, first.sandbox_id]
        # Pages of one, through the paginator.
        p = S.list(query=SandboxQuery(metadata=tag), limit=1)
        pages = []
        while p.has_next:
            pages.append([x.sandbox_id for x in await aw(p.next_items())])
        assert pages == [[second.sandbox_id], [first.sandbox_id]]
        listed = (await aw(S.list(query=SandboxQuery(metadata=tag)).next_items()))[0]
        assert listed.template_id == "base"
        assert listed.metadata == tag
        assert listed.started_at.tzinfo is not None
    finally:
        await aw(first.kill())
        await aw(second.kill())


async def test_connect_kill_and_is_running(S):
    s = await aw(S.create())
    same = await aw(S.connect(s.sandbox_id))
    assert same.sandbox_id == s.sandbox_id
    assert (await aw(same.commands.run("echo via-connect"))).stdout == "via-connect\n"
    assert await aw(s.is_running()) is True
    assert await aw(s.kill()) is True
    assert await aw(s.is_running()) is False
    assert await aw(S.kill(s.sandbox_id)) is False
    with pytest.raises(NotFoundException):
        await aw(S.connect(s.sandbox_id))
    with pytest.raises(NotFoundException):
        await aw(S.get_info(s.sandbox_id))


async def test_set_timeout_ends_the_sandbox_on_time(S):
    s = await aw(S.create())
    await aw(s.set_timeout(1))
    assert await wait_until(lambda: _not(s.is_running()), 15), "the sandbox outlived its timeout"
    with pytest.raises(NotFoundException):
        await aw(s.get_info())


async def _not(value):
    return not await aw(value)


async def test_bad_timeouts_are_the_callers_error(S):
    with pytest.raises(SandboxException, match="400"):
        await aw(S.create(timeout=-1))


async def test_a_wrong_api_key_is_refused(S):
    with pytest.raises(AuthenticationException):
        await aw(S.create(api_key="e2b_" + "f" * 40))
    assert API_KEY != "e2b_" + "f" * 40


async def test_metrics(S, sbx):
    await aw(sbx.commands.run("head -c 1000000 /dev/urandom > /tmp/noise"))
    metrics = []

    async def some():
        metrics[:] = await aw(sbx.get_metrics())
        return len(metrics) > 0

    assert await wait_until(some, 30), "no metrics within 30 s"
    m = metrics[-1]
    assert m.cpu_count >= 1
    assert 0 < m.mem_used <= m.mem_total
    assert 0 < m.disk_used <= m.disk_total
    assert m.timestamp.tzinfo is not None
    start = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    assert await aw(sbx.get_metrics(start=start)) == []


async def test_an_idempotency_key_makes_one_sandbox(S):
    key = f"py-{RUN}-{S.__name__.lower()}"
    tag = {"idem": key}
    a = await aw(S.create(metadata=tag, idempotency_key=key))
    b = await aw(S.create(metadata=tag, idempotency_key=key))
    try:
        assert a.sandbox_id == b.sandbox_id
        assert (await aw(b.commands.run("echo same"))).stdout == "same\n"
        listed = await aw(S.list(query=SandboxQuery(metadata=tag)).next_items())
        assert [x.sandbox_id for x in listed] == [a.sandbox_id]
        with pytest.raises(SandboxException, match="409"):
            await aw(S.create(metadata={"idem": "another body"}, idempotency_key=key))
    finally:
        await aw(a.kill())
