"""The official e2b-code-interpreter (PyPI 2.11.5), sync and async:
run_code in every language, results, charts, DataFrames, errors,
environment, contexts and timeouts. Its sandboxes come from a template
over base with the code interpreter as its start command, as
code-interpreter-v1 has it (python_test.go runs this file)."""

import base64

import pytest
from e2b import Template
from e2b_code_interpreter import AsyncSandbox, Sandbox

from conftest import RUN, aw

TEMPLATE = "ci-compat-py"


@pytest.fixture(scope="session")
def template():
    tpl = (
        Template()
        .from_template("base")
        .set_start_cmd("sudo /.cove/cove-envd code-interpreter", "/.cove/cove-envd code-interpreter --ready")
    )
    Template.build(tpl, TEMPLATE)
    return TEMPLATE


@pytest.fixture(params=["sync", "async"])
def C(request):
    """The code interpreter's Sandbox class."""
    return Sandbox if request.param == "sync" else AsyncSandbox


@pytest.fixture
async def ci(C, template):
    s = await aw(C.create(template, metadata={"suite": "compat-py", "run": RUN}))
    yield s
    await aw(s.kill())


async def test_state_between_calls_and_the_last_expression(ci):
    await aw(ci.run_code("x = 41"))
    ex = await aw(ci.run_code("x + 1"))
    assert ex.text == "42"
    assert len(ex.results) == 1 and ex.results[0].is_main_result
    assert ex.execution_count >= 2
    assert ex.error is None


async def test_stdout_stderr_callbacks_and_logs(ci):
    out, err = [], []
    ex = await aw(ci.run_code('import sys\nprint("hello")\nprint("oops", file=sys.stderr)', on_stdout=lambda m: out.append(m.line), on_stderr=lambda m: err.append(m.line)))
    assert ex.logs.stdout == ["hello\n"] and ex.logs.stderr == ["oops\n"]
    assert out == ["hello\n"] and err == ["oops\n"]


async def test_an_exception_is_the_error_with_its_traceback(ci):
    errors = []
    ex = await aw(ci.run_code('def f():\n    raise ValueError("bad value")\nf()', on_error=errors.append))
    assert (ex.error.name, ex.error.value) == ("ValueError", "bad value")
    assert "ValueError" in ex.error.traceback
    assert len(errors) == 1


async def test_a_chart_and_a_dataframe(ci):
    ex = await aw(ci.run_code('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.title("t")'))
    png = next(r for r in ex.results if r.png)
    assert base64.b64decode(png.png)[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.chart.type.value == "line"
    assert png.chart.title == "t"
    assert [tuple(p) for p in png.chart.elements[0].points] == [(1, 4), (2, 1), (3, 9)]
    df = await aw(ci.run_code('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})'))
    assert "<table" in df.results[0].html
    assert "a" in df.text and "b" in df.text


async def test_envs_for_one_call_and_the_sandbox_environment(ci):
    # A string is its value, not its repr, as on E2B.
    assert (await aw(ci.run_code('import os\nos.environ["CI_VAR"]', envs={"CI_VAR": "for-this-call"}))).text == "for-this-call"
    assert (await aw(ci.run_code('import os\nos.environ.get("CI_VAR", "unset")'))).text == "unset"
    assert (await aw(ci.run_code('import os\nos.environ["E2B_SANDBOX_ID"]'))).text == ci.sandbox_id


async def test_javascript_typescript_bash_r_and_java(ci):
    await aw(ci.run_code('const greeting = "hi"', language="js"))
    assert (await aw(ci.run_code('greeting + "!"', language="javascript"))).text == "hi!"
    assert (await aw(ci.run_code("const n: number = 6\nn * 7", language="ts"))).text == "42"
    assert (await aw(ci.run_code('echo "$((6 * 7))"', language="bash"))).logs.stdout == ["42\n"]
    await aw(ci.run_code("v <- c(1, 2, 3)", language="r"))
    r = await aw(ci.run_code("sum(v)", language="r"))
    assert r.results[0].text == "[1] 6" and r.text == "[1] 6"
    await aw(ci.run_code("int base = 40;", language="java"))
    java = await aw(ci.run_code('System.out.println("java");\nbase + 2', language="java"))
    assert java.text == "42" and java.logs.stdout == ["java\n"]


async def test_contexts(ci):
    ctx = await aw(ci.create_code_context(cwd="/tmp", language="python"))
    assert (ctx.cwd, ctx.language) == ("/tmp", "python")
    assert (await aw(ci.run_code("import os\nos.getcwd()", context=ctx))).text == "/tmp"
    await aw(ci.run_code("y = 1", context=ctx))
    assert any(c.id == ctx.id for c in await aw(ci.list_code_contexts()))
    await aw(ci.restart_code_context(ctx))
    assert (await aw(ci.run_code("y", context=ctx))).error.name == "NameError"
    await aw(ci.remove_code_context(ctx))
    assert not any(c.id == ctx.id for c in await aw(ci.list_code_contexts()))


async def test_a_timeout_interrupts_the_code_and_keeps_the_context(ci):
    await aw(ci.run_code('kept = "still here"'))
    with pytest.raises(Exception, match="(?i)timed? ?out"):
        await aw(ci.run_code("import time\nwhile True: time.sleep(0.1)", timeout=1.5))
    assert (await aw(ci.run_code("kept"))).text == "still here"


async def test_an_unknown_language_is_refused(ci):
    with pytest.raises(Exception, match="400"):
        await aw(ci.run_code("1", language="cobol", request_timeout=5))
