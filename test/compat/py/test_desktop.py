"""The official e2b-desktop (PyPI 2.7.2; it has a sync client only)
against a server in E2B's domain mode (desktop_test.go): the SDK starts
Xvfb and an XFCE session through commands, drives them with xdotool,
takes screenshots and starts the noVNC stream on the sandbox's HTTPS
URL. The template is desktop's recipe over base: DESKTOP_SETUP is its
last step."""

import os
import re
import ssl
import struct
import time
import urllib.request

import pytest
from e2b import Template
from e2b_desktop import Sandbox

from conftest import RUN

TEMPLATE = "desktop-compat-py"
WIDTH, HEIGHT = 1024, 768


@pytest.fixture(scope="module")
def desktop():
    Template.build(Template().from_template("base").run_cmd(os.environ["DESKTOP_SETUP"], user="root"), TEMPLATE)
    s = Sandbox.create(TEMPLATE, resolution=(WIDTH, HEIGHT), timeout=600, metadata={"run": RUN})
    yield s
    s.kill()


def png_size(b):
    assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR"
    return struct.unpack(">II", b[16:24])


def wait_for(cond, what, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} within {timeout} s")


def test_the_display_at_the_resolution_asked(desktop):
    assert desktop.get_screen_size() == (WIDTH, HEIGHT)
    assert desktop.commands.run("echo $DISPLAY").stdout == ":0\n"
    for p in ["Xvfb", "xfce4-session", "xfwm4"]:
        assert desktop.commands.run(f"pgrep -x {p} >/dev/null && echo up").stdout == "up\n", p


def test_screenshot_is_a_png_of_the_screen(desktop):
    assert png_size(bytes(desktop.screenshot())) == (WIDTH, HEIGHT)
    assert png_size(b"".join(desktop.screenshot(format="stream"))) == (WIDTH, HEIGHT)


def test_the_mouse_and_the_keyboard_reach_a_window(desktop):
    desktop.commands.run("xev -geometry 400x300+200+150 -name cove-probe-py -event keyboard -event button > /tmp/xev.log 2>&1", background=True, timeout=0)
    probe = {}

    def found():
        probe["id"] = desktop.commands.run("xdotool search --onlyvisible --name cove-probe-py || true").stdout.strip()
        return probe["id"] != ""

    wait_for(found, "the xev window")
    desktop.left_click(300, 250)
    assert desktop.get_cursor_position() == (300, 250)
    desktop.write("Hi")
    desktop.press("enter")
    desktop.right_click()
    assert desktop.get_window_title(probe["id"]) == "cove-probe-py"
    wait_for(lambda: "Return" in desktop.files.read("/tmp/xev.log"), "the key presses")
    log = desktop.files.read("/tmp/xev.log")
    presses = [re.search(r"keysym 0x[0-9a-f]+, (\w+)\)", b).group(1) for b in log.split("\n\n") if b.startswith("KeyPress event")]
    assert presses == ["Shift_L", "H", "i", "Return"], log
    assert log.count("ButtonPress event") >= 2


def test_the_stream_is_served_on_the_sandbox_url(desktop):
    desktop.stream.start()
    url = desktop.stream.get_url()
    host = f"6080-{desktop.sandbox_id}.{os.environ['E2B_DOMAIN']}"
    assert url.startswith(f"https://{host}/vnc.html?"), url
    ctx = ssl.create_default_context(cafile=os.environ["COMPAT_CA_FILE"])
    got = {}

    def served():
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=10) as res:
                got["body"] = res.read().decode()
                return res.status == 200
        except OSError as e:
            got["body"] = str(e)
            return False

    wait_for(served, "noVNC's page")
    assert "noVNC" in got["body"]
    desktop.stream.stop()
