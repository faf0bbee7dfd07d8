"""Templates built over a template with a start command, through the
official SDKs' Template builder (sync and async) and their Dockerfile
parser: a child of the code interpreter's template stays a code
interpreter, its environment, files, user and directory seen by the
kernels; a child that sets its own start command is told in its build's
log what it replaced; a Dockerfile's FROM names a template of the server
whichever client sends it (python_test.go runs this file).

The parent stands in for code-interpreter-v1, which is built from Debian's
archive and PyPI on first use: a template over base with the same start
and ready commands (what code-interpreter-v1 has, INTERNALS.md's "The code
interpreter"), built once for the file."""

import asyncio

import e2b
import pytest
from e2b import AsyncTemplate, Template
from e2b_code_interpreter import AsyncSandbox, Sandbox

from conftest import RUN, aw

START = "sudo /.cove/cove-envd code-interpreter"
READY = "/.cove/cove-envd code-interpreter --ready"
PARENT = "inherit-ci-" + RUN


def build(tpl, name):
    """Builds tpl as name with the sync SDK; returns its log's messages."""
    lines = []
    Template.build(tpl, name, on_build_logs=lambda e: lines.append(e.message))
    return lines


@pytest.fixture(scope="module")
def parent():
    build(Template().from_template("base").set_start_cmd(START, READY), PARENT)
    return PARENT


@pytest.fixture(scope="module")
def sdk_child(parent):
    """A child through the builder: variables, a file made as root, its
    own directory, the template's user last."""
    name = "inherit-sdk-" + RUN
    log = build(
        Template()
        .from_template(parent)
        .set_envs({"CHILD_VAR": "from-the-template"})
        .set_user("root")
        .run_cmd("mkdir -p /srv/work && echo made-by-the-build > /srv/work/data.txt && chown -R user /srv/work")
        .set_user("user")
        .set_workdir("/srv/work"),
        name,
    )
    return name, log


@pytest.fixture(scope="module")
def dockerfile_child(sdk_child):
    """A grandchild from a Dockerfile through the async SDK: FROM names the
    team's template (the SDK sends it as an image), USER root last."""
    name = "inherit-df-" + RUN
    tpl = Template().from_dockerfile(
        f"FROM {sdk_child[0]}\nENV DF_VAR=from-the-dockerfile\nRUN mkdir -p /root/df && echo grandchild > /root/df/data.txt\nUSER root\nWORKDIR /root/df\n"
    )
    asyncio.run(AsyncTemplate.build(tpl, name))
    return name


@pytest.fixture(params=["sync", "async"])
def C(request):
    """The code interpreter's Sandbox class."""
    return Sandbox if request.param == "sync" else AsyncSandbox


async def create(C, name):
    return await aw(C.create(name, metadata={"suite": "compat-py", "run": RUN}))


async def test_a_child_of_the_code_interpreter_is_one(C, sdk_child):
    name, log = sdk_child
    s = await create(C, name)
    try:
        ex = await aw(s.run_code('import os\n(os.environ["CHILD_VAR"], os.getcwd(), open("data.txt").read().strip())'))
        assert ex.error is None, ex.error
        assert ex.text == "('from-the-template', '/srv/work', 'made-by-the-build')"
        # The interpreter runs as root through sudo, as E2B's does; the
        # template's user is who started it.
        ex = await aw(s.run_code('import os, getpass\n(getpass.getuser(), os.environ.get("SUDO_USER"))'))
        assert ex.text == "('root', 'user')"
        js = await aw(s.run_code("process.cwd()", language="javascript"))
        assert js.text == "/srv/work"
    finally:
        await aw(s.kill())
    assert any(START in line and "inherited" in line for line in log), log


async def test_a_dockerfile_child_of_a_child(C, dockerfile_child):
    s = await create(C, dockerfile_child)
    try:
        ex = await aw(s.run_code('import os, getpass\n(os.environ["CHILD_VAR"], os.environ["DF_VAR"], os.getcwd(), open("data.txt").read().strip(), getpass.getuser())'))
        assert ex.error is None, ex.error
        assert ex.text == "('from-the-template', 'from-the-dockerfile', '/root/df', 'grandchild', 'root')"
    finally:
        await aw(s.kill())


async def test_an_own_start_command_replaces_the_parents(C, parent):
    """The child's start command runs, the parent's does not, and the
    build's log says so, naming both."""
    name = "inherit-own-" + RUN
    own = "python3 -m http.server 8000 --bind 127.0.0.1"
    tpl = Template().from_template(parent).set_start_cmd(own, "curl -sf -o /dev/null http://127.0.0.1:8000/")
    if C is Sandbox:
        log = build(tpl, name)
    else:
        log = []
        await AsyncTemplate.build(tpl, name, on_build_logs=lambda e: log.append(e.message))
    assert any(own in line and START in line and "replaces" in line for line in log), log
    s = await create(C, name)
    try:
        r = await aw(s.commands.run("curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8000/; pgrep -f '[c]ove-envd code-interpreter' || echo none"))
        assert r.stdout.split() == ["200", "none"], r.stdout
    finally:
        await aw(s.kill())


async def test_from_dockerfile_names_a_template_of_the_server(S):
    """FROM base through the SDK's Dockerfile parser builds on the server's
    base (never Docker Hub), as `cove template build` does."""
    sync = S is e2b.Sandbox
    name = f"inherit-from-base-{'sync' if sync else 'async'}-" + RUN
    tpl = Template().from_dockerfile("FROM base\nRUN echo on-base > /tmp/made\n")
    await aw((Template if sync else AsyncTemplate).build(tpl, name))
    s = await aw(S.create(name, metadata={"suite": "compat-py", "run": RUN}))
    try:
        assert (await aw(s.commands.run("cat /tmp/made"))).stdout == "on-base\n"
    finally:
        await aw(s.kill())
