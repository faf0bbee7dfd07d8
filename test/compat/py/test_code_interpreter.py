"""The official e2b-code-interpreter (PyPI 2.11.5), sync and async:
run_code in every language, results, charts, DataFrames, errors,
environment, contexts and timeouts. Its sandboxes come from a template
over base with the code interpreter as its start command, as
code-interpreter-v1 has it (compat_test.go runs this file).

COMPAT_CI_TEMPLATE names a built template to run on instead, the real
code-interpreter-v1 of a server that prepared it (its Python and packages
from PyPI, where base has the host's): every package of its list must
import there."""

import base64
import json
import os
import pathlib
import re
import subprocess

import pytest
from e2b import Template
from e2b_code_interpreter import AsyncSandbox, Sandbox

from conftest import RUN, aw

TEMPLATE = "ci-compat-py"
REAL_TEMPLATE = os.environ.get("COMPAT_CI_TEMPLATE")


@pytest.fixture(scope="session")
def template():
    if REAL_TEMPLATE:
        return REAL_TEMPLATE
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


# matplotlib 3.10 deprecates reading Axis.converter from outside matplotlib
# (get_converter() is the new way): such a read warns on the reader's
# stderr. Where the sandbox's matplotlib is older (base has the host's),
# this gives it 3.10's rule, so that the chart's extraction is held to it.
AS_MATPLOTLIB_3_10 = """
import sys, matplotlib.axis
from matplotlib import _api
if not hasattr(matplotlib.axis.Axis, "get_converter"):
    def _read(self):
        if not sys._getframe(1).f_globals.get("__name__", "").startswith("matplotlib"):
            _api.warn_deprecated("3.10", name="converter", obj_type="attribute", alternative="get_converter()")
        return self.__dict__.get("converter")
    def _write(self, value):
        self.__dict__["converter"] = value
    matplotlib.axis.Axis.converter = property(_read, _write)
    matplotlib.axis.Axis.get_converter = lambda self: self.__dict__.get("converter")
"""


async def test_a_chart_leaves_stderr_as_the_code_left_it(ci):
    # What the code writes to stderr (its own warning) is all there is: the
    # chart read out of each figure adds nothing. A read of the deprecated
    # attribute by the user's own code still warns. Over the host's /usr
    # (many fonts) matplotlib's first import in a sandbox makes its font
    # cache and, past 5 s, says so on stderr: done first (code-interpreter-v1
    # makes it in 0.4 s).
    if not REAL_TEMPLATE:
        await aw(ci.run_code("import matplotlib.pyplot"))
    code = AS_MATPLOTLIB_3_10 + """
import warnings
import matplotlib.pyplot as plt
warnings.warn("the code's own warning")
plt.plot([1, 2, 3], [4, 1, 9])
plt.title("t")
plt.show()
plt.bar(["a", "b"], [3, 5])
plt.show()
"""
    ex = await aw(ci.run_code(code))
    assert ex.error is None, ex.error
    charts = [r.chart for r in ex.results if r.chart]
    assert [c.type.value for c in charts] == ["line", "bar"]
    assert [tuple(p) for p in charts[0].elements[0].points] == [(1, 4), (2, 1), (3, 9)]
    assert [(e.label, e.value) for e in charts[1].elements] == [("a", 3), ("b", 5)]
    assert re.fullmatch(r"[^\n]*: UserWarning: the code's own warning\n(  warnings\.warn\([^\n]*\)\n)?", "".join(ex.logs.stderr)), ex.logs.stderr
    own = await aw(ci.run_code("plt.plot([1, 2])\nplt.gca().xaxis.converter"))
    assert "converter" in "".join(own.logs.stderr), own.logs.stderr


def listed_modules():
    """The modules of code-interpreter-v1's Python packages
    (template.CodeInterpreterPython: E2B's and the ones Cove adds)."""
    src = (pathlib.Path(__file__).parents[3] / "internal/template/codeinterp.go").read_text()
    mods = re.findall(r'\{"[^"]+", "[^"]*", "([^"]+)"\}', src)
    assert len(mods) >= 50, mods
    return mods


def imports_code(mods):
    return "import importlib, json\nfound = {}\nfor m in %r:\n    try:\n        importlib.import_module(m)\n        found[m] = True\n    except ImportError:\n        found[m] = False\nprint(json.dumps(found))\n" % (mods,)


async def test_the_listed_packages_import(ci):
    # The real template imports every one; a template over base, what the
    # host's Python imports (the host's /usr is base's).
    mods = listed_modules()
    if REAL_TEMPLATE:
        want = {m: True for m in mods}
    else:
        want = json.loads(subprocess.run(["/usr/bin/python3", "-c", imports_code(mods)], capture_output=True, check=True, text=True).stdout)
    ex = await aw(ci.run_code(imports_code(mods), timeout=240, request_timeout=300))
    assert ex.error is None and len(ex.logs.stdout) == 1, (ex.error, ex.logs)
    assert json.loads(ex.logs.stdout[0]) == want
    # What they are there for: a regression, Parquet, a Markdown table.
    if REAL_TEMPLATE:
        ex = await aw(ci.run_code("""
import io, pandas as pd, statsmodels.api as sm
df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": [3.0, 5.0, 7.0, 9.0]})
fit = sm.OLS(df.y, sm.add_constant(df.x)).fit()
buf = io.BytesIO()
df.to_parquet(buf)
back = pd.read_parquet(io.BytesIO(buf.getvalue()))
print(round(fit.params["x"], 6), back.equals(df), df.head(1).to_markdown(index=False).splitlines()[0])
""", timeout=120, request_timeout=180))
        assert ex.error is None and ex.logs.stdout == ["2.0 True |   x |   y |\n"], (ex.error, ex.logs)
