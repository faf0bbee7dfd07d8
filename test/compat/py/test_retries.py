"""The Python SDK's retries (2.60) against Cove's answers: a create
refused by the team's cap of running sandboxes says Should-Retry: true
and Retry-After, so the SDK tries again and gets its sandbox once one
ended, never two; a bad request says Should-Retry: false and fails at
once. python_test.go starts this file's server with
--team-max-sandboxes 1, and puts before its API a proxy that counts the
creates it passes on (COMPAT_CREATES_URL answers how many)."""

import asyncio
import os
import urllib.request

import pytest
from e2b import RateLimitException, SandboxException, SandboxQuery

from conftest import RUN, aw


def creates():
    with urllib.request.urlopen(os.environ["COMPAT_CREATES_URL"], timeout=10) as res:
        return int(res.read())


async def test_a_capped_create_is_retried_until_it_passes(S):
    tag = {"retries": RUN + S.__name__}
    first = await aw(S.create(metadata=tag))
    with pytest.raises(RateLimitException):
        await aw(S.create(metadata=tag, retries=0))

    async def end_first():
        await asyncio.sleep(0.5)
        await aw(first.kill())

    before = creates()
    killer = asyncio.create_task(end_first())
    if S.__name__ == "Sandbox":
        # The sync client blocks the loop: the kill runs in a thread.
        await asyncio.sleep(0)
        second = await asyncio.to_thread(S.create, metadata=tag)
    else:
        second = await S.create(metadata=tag)
    await killer
    assert creates() - before >= 2, "the refused create was not tried again"
    try:
        running = await aw(S.list(query=SandboxQuery(metadata=tag)).next_items())
        assert [x.sandbox_id for x in running] == [second.sandbox_id]
    finally:
        await aw(second.kill())


async def test_a_bad_request_is_not_retried(S):
    before = creates()
    with pytest.raises(SandboxException, match="400"):
        await aw(S.create(timeout=-1))
    assert creates() - before == 1, "a 400 was tried again"
