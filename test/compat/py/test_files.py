"""Files: text, bytes and streams both ways, write_files, list, exists,
get_info, make_dir, rename, remove, watch_dir, upload and download URLs,
large files, and the octet-stream writes of 2.62."""

import hashlib
import io
import os
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from e2b import FileType, NotFoundException, SandboxException

from conftest import aw, wait_until


async def test_text_bytes_list_exists_info_make_dir_rename_remove(sbx):
    await aw(sbx.files.write("/home/user/dir/a.txt", "alpha"))
    data = bytes([0, 1, 2, 250, 255])
    info = await aw(sbx.files.write("/home/user/dir/b.bin", data))
    assert info.path == "/home/user/dir/b.bin" and info.name == "b.bin"
    assert await aw(sbx.files.read("/home/user/dir/a.txt")) == "alpha"
    assert bytes(await aw(sbx.files.read("/home/user/dir/b.bin", format="bytes"))) == data
    assert await aw(sbx.files.make_dir("/home/user/dir/sub/deeper")) is True
    assert await aw(sbx.files.make_dir("/home/user/dir/sub/deeper")) is False
    one = await aw(sbx.files.list("/home/user/dir"))
    assert sorted(e.name for e in one) == ["a.txt", "b.bin", "sub"]
    two = await aw(sbx.files.list("/home/user/dir", depth=3))
    assert any(e.path == "/home/user/dir/sub/deeper" and e.type == FileType.DIR for e in two)
    got = await aw(sbx.files.get_info("/home/user/dir/a.txt"))
    assert (got.size, got.type, got.owner) == (5, FileType.FILE, "user")
    assert await aw(sbx.files.exists("/home/user/dir/a.txt")) is True
    assert await aw(sbx.files.exists("/home/user/dir/nope")) is False
    await aw(sbx.files.rename("/home/user/dir/a.txt", "/home/user/dir/c.txt"))
    assert await aw(sbx.files.read("/home/user/dir/c.txt")) == "alpha"
    await aw(sbx.files.remove("/home/user/dir"))
    assert await aw(sbx.files.exists("/home/user/dir")) is False
    with pytest.raises(NotFoundException):
        await aw(sbx.files.read("/home/user/missing.txt"))


async def test_write_files_streams_and_gzip(S, sbx):
    written = await aw(
        sbx.files.write_files(
            [
                {"path": "/home/user/many/one.txt", "data": "1"},
                {"path": "/home/user/many/two.bin", "data": b"\x02"},
                {"path": "/home/user/many/three.txt", "data": io.BytesIO(b"three")},
            ]
        )
    )
    assert sorted(w.name for w in written) == ["one.txt", "three.txt", "two.bin"]
    assert (await aw(sbx.commands.run("cat /home/user/many/one.txt /home/user/many/three.txt"))).stdout == "1three"
    # An iterable of chunks goes as application/octet-stream (2.62).
    chunks = [b"chunk-%d;" % i for i in range(1000)]
    if S.__name__ == "Sandbox":
        await aw(sbx.files.write("/home/user/streamed.txt", iter(chunks)))
    else:

        async def gen():
            for c in chunks:
                yield c

        await sbx.files.write("/home/user/streamed.txt", gen())
    assert bytes(await aw(sbx.files.read("/home/user/streamed.txt", format="bytes"))) == b"".join(chunks)
    # gzip both ways.
    await aw(sbx.files.write("/home/user/gz.txt", "zipped " * 1000, gzip=True))
    assert await aw(sbx.files.read("/home/user/gz.txt", gzip=True)) == "zipped " * 1000
    # A stream read.
    stream = await aw(sbx.files.read("/home/user/gz.txt", format="stream"))
    if S.__name__ == "Sandbox":
        body = b"".join(stream)
    else:
        body = b"".join([c async for c in stream])
    assert body == b"zipped " * 1000


async def test_large_files_both_ways(S, sbx):
    size = 48 << 20
    block = os.urandom(1 << 20)
    want = hashlib.sha256(block * (size // len(block))).hexdigest()
    await aw(sbx.files.write("/home/user/large.bin", io.BytesIO(block * (size // len(block)))))
    r = await aw(sbx.commands.run("sha256sum /home/user/large.bin | cut -d' ' -f1"))
    assert r.stdout.strip() == want
    got = await aw(sbx.files.read("/home/user/large.bin", format="bytes"))
    assert len(got) == size
    assert hashlib.sha256(got).hexdigest() == want


async def test_rights_metadata_and_a_read_only_file_system(sbx):
    await aw(sbx.files.write("/home/user/meta/target.txt", "x", metadata={"author": "alice"}))
    info = await aw(sbx.files.get_info("/home/user/meta/target.txt"))
    assert info.metadata == {"author": "alice"}
    with pytest.raises(SandboxException, match="(?i)denied"):
        await aw(sbx.files.write("/etc/hosts", "mine"))
    assert isinstance(await aw(sbx.files.list("/root", user="root")), list)
    with pytest.raises(SandboxException, match="read-only"):
        await aw(sbx.files.write("/usr/cove-test", "x", user="root"))


async def test_watch_dir_sees_a_new_file(S, sbx):
    await aw(sbx.files.make_dir("/home/user/watched"))
    if S.__name__ == "Sandbox":
        w = sbx.files.watch_dir("/home/user/watched")
        sbx.files.write("/home/user/watched/new.txt", "x")
        events = []

        def seen():
            events.extend(w.get_new_events())
            return any(e.name == "new.txt" for e in events)

        assert await wait_until(seen, 30), events
        w.stop()
    else:
        events = []
        w = await sbx.files.watch_dir("/home/user/watched", events.append)
        await sbx.files.write("/home/user/watched/new.txt", "x")
        assert await wait_until(lambda: any(e.name == "new.txt" for e in events), 30), events
        await w.stop()


def _post_multipart(url, name, body):
    boundary = uuid.uuid4().hex
    data = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + body + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(url, data=data, method="POST")
    req.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
    with urllib.request.urlopen(req, timeout=30) as res:
        return res.status


async def test_upload_and_download_urls(sbx):
    up = await aw(sbx.upload_url("/home/user/up.txt"))
    assert _post_multipart(up, "up.txt", b"uploaded") == 200
    down = await aw(sbx.download_url("/home/user/up.txt"))
    with urllib.request.urlopen(down, timeout=30) as res:
        assert res.read() == b"uploaded"
    u = urllib.parse.urlsplit(down)
    q = dict(urllib.parse.parse_qsl(u.query))
    q["signature"] = "v1_forged"
    forged = urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(q)))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(forged, timeout=30)
    assert e.value.code == 401
