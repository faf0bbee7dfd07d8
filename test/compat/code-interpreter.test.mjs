// The official @e2b/code-interpreter@2.8.0 against a real `cove server`:
// runCode in every language, results, errors, environment, contexts and
// interrupts. The sandboxes come from a template over `base` with the
// code interpreter as its start command, as code-interpreter-v1 has it.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import { Template } from 'e2b'

const TEMPLATE = 'ci-compat'
let sbx

before(async () => {
  const tpl = Template()
    .fromTemplate('base')
    .setStartCmd('sudo /.cove/cove-envd code-interpreter', '/.cove/cove-envd code-interpreter --ready')
  await Template.build(tpl, TEMPLATE)
  sbx = await Sandbox.create(TEMPLATE)
})

after(async () => {
  if (sbx) await sbx.kill()
})

test('runCode keeps state between calls and returns the last expression', async () => {
  await sbx.runCode('x = 41')
  const exec = await sbx.runCode('x + 1')
  assert.equal(exec.text, '42')
  assert.equal(exec.results.length, 1)
  assert.equal(exec.results[0].isMainResult, true)
  assert.ok(exec.executionCount >= 2)
  assert.equal(exec.error, undefined)
})

test('stdout and stderr reach the callbacks and the logs', async () => {
  const out = []
  const err = []
  const exec = await sbx.runCode('import sys\nprint("hello")\nprint("oops", file=sys.stderr)', {
    onStdout: (m) => out.push(m.line),
    onStderr: (m) => err.push(m.line),
  })
  assert.deepEqual(exec.logs.stdout, ['hello\n'])
  assert.deepEqual(exec.logs.stderr, ['oops\n'])
  assert.deepEqual(out, ['hello\n'])
  assert.deepEqual(err, ['oops\n'])
})

test('an exception is the execution error, with its traceback', async () => {
  const errors = []
  const exec = await sbx.runCode('def f():\n    raise ValueError("bad value")\nf()', { onError: (e) => errors.push(e) })
  assert.equal(exec.error.name, 'ValueError')
  assert.equal(exec.error.value, 'bad value')
  assert.match(exec.error.traceback, /ValueError/)
  assert.equal(errors.length, 1)
})

test('code indented inside a template string runs', async () => {
  const exec = await sbx.runCode(`
    def g(v):
        return v * 3
    g(5)
  `)
  assert.equal(exec.text, '15')
})

test('a matplotlib figure comes back as a PNG without plt.show()', async () => {
  const exec = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.title("t")')
  const png = exec.results.find((r) => r.png)
  assert.ok(png, `results: ${JSON.stringify(exec.results.map((r) => r.formats()))} ${JSON.stringify(exec.error)}`)
  const bytes = Buffer.from(png.png, 'base64')
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  assert.equal(png.chart.type, 'line')
  assert.equal(png.chart.title, 't')
  assert.deepEqual(png.chart.elements[0].points, [[1, 4], [2, 1], [3, 9]])
})

test('a DataFrame is HTML and text', async () => {
  const exec = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
  assert.match(exec.results[0].html, /<table/)
  assert.match(exec.text, /a\s+b/)
})

test('envs reach the code for one call only; the sandbox environment always', async () => {
  const exec = await sbx.runCode('import os\nos.environ["CI_VAR"]', { envs: { CI_VAR: 'for-this-call' } })
  assert.equal(exec.text, 'for-this-call')
  const after = await sbx.runCode('import os\nos.environ.get("CI_VAR", "unset")')
  assert.equal(after.text, 'unset')
  const id = await sbx.runCode('import os\nos.environ["E2B_SANDBOX_ID"]')
  assert.equal(id.text, sbx.sandboxId)
})

test('JavaScript, TypeScript and Bash', async () => {
  await sbx.runCode('const greeting = "hi"', { language: 'js' })
  assert.equal((await sbx.runCode('greeting + "!"', { language: 'javascript' })).text, 'hi!')
  assert.equal((await sbx.runCode('await Promise.resolve(5)', { language: 'js' })).text, '5')
  const ts = await sbx.runCode('const n: number = 6\nn * 7', { language: 'ts' })
  assert.equal(ts.text, '42')
  const sh = await sbx.runCode('echo "$((6 * 7))"', { language: 'bash' })
  assert.deepEqual(sh.logs.stdout, ['42\n'])
})

test('R and Java', async () => {
  await sbx.runCode('v <- c(1, 2, 3)', { language: 'r' })
  // IRkernel shows a value as a display; the last one is the main result.
  const r = await sbx.runCode('sum(v)', { language: 'r' })
  assert.equal(r.results[0].text, '[1] 6')
  assert.equal(r.text, '[1] 6')
  assert.equal((await sbx.runCode('v[1]; v[3]', { language: 'r' })).text, '[1] 3')
  await sbx.runCode('int base = 40;', { language: 'java' })
  const java = await sbx.runCode('System.out.println("java");\nbase + 2', { language: 'java', envs: { JVAR: 'j' } })
  assert.equal(java.text, '42')
  assert.deepEqual(java.logs.stdout, ['java\n'])
  assert.equal((await sbx.runCode('System.getenv("JVAR") + System.getProperty("JVAR")', { language: 'java', envs: { JVAR: 'j' } })).text, 'jj')
})

test('contexts: create with a cwd, list, restart, delete', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp', language: 'python' })
  assert.equal(ctx.cwd, '/tmp')
  assert.equal(ctx.language, 'python')
  assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, '/tmp')
  await sbx.runCode('y = 1', { context: ctx })
  const list = await sbx.listCodeContexts()
  assert.deepEqual(list.slice(0, 2).map((c) => c.language), ['python', 'javascript'])
  assert.ok(list.some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  const gone = await sbx.runCode('y', { context: ctx })
  assert.equal(gone.error.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
  await assert.rejects(sbx.runCode('1', { context: ctx, requestTimeoutMs: 5000 }), /not found/)
})

test('the kernels run as root, as on E2B: a context in /root works; the default ones work in /home/user', async () => {
  // E2B's own test "create context with options" asks for /root.
  const ctx = await sbx.createCodeContext({ cwd: '/root', language: 'python' })
  assert.equal(ctx.cwd, '/root')
  assert.equal((await sbx.runCode('import os\n(os.getcwd(), os.getuid())', { context: ctx })).text, "('/root', 0)")
  await sbx.removeCodeContext(ctx)
  assert.equal((await sbx.runCode('import os\nos.getcwd()')).text, '/home/user')
  assert.equal((await sbx.runCode('process.cwd()', { language: 'js' })).text, '/home/user')
  // What the code writes is root's; the files API's user reads it.
  await sbx.runCode('open("/home/user/from-kernel.txt", "w").write("k")')
  assert.equal(await sbx.files.read('/home/user/from-kernel.txt'), 'k')
  assert.equal((await sbx.commands.run('stat -c %U /home/user/from-kernel.txt')).stdout, 'root\n')
  // sudo resets the server's environment; the sandbox's variables still
  // reach the kernels (through the agent's /envs).
  const withEnv = await Sandbox.create(TEMPLATE, { envs: { CI_SANDBOX_VAR: 'from-create' } })
  try {
    assert.equal((await withEnv.runCode('import os\nos.environ.get("CI_SANDBOX_VAR")')).text, 'from-create')
    assert.equal((await withEnv.runCode('process.env.CI_SANDBOX_VAR', { language: 'js' })).text, 'from-create')
    // E2B's Java kernel has them as system properties too.
    const java = await withEnv.runCode('System.getProperty("CI_SANDBOX_VAR") + " " + System.getenv("CI_SANDBOX_VAR")', { language: 'java' })
    assert.equal(java.text, 'from-create from-create')
    assert.equal((await withEnv.runCode('Sys.getenv("CI_SANDBOX_VAR")', { language: 'r' })).text, '[1] "from-create"')
  } finally {
    await withEnv.kill()
  }
})

test('a timeout interrupts the code; the context keeps its state', async () => {
  await sbx.runCode('kept = "still here"')
  await assert.rejects(sbx.runCode('import time\nwhile True: time.sleep(0.1)', { timeoutMs: 1500 }), /timed out/i)
  const exec = await sbx.runCode('kept')
  assert.equal(exec.text, 'still here')
})

test('an unknown language is refused', async () => {
  await assert.rejects(sbx.runCode('1', { language: 'cobol', requestTimeoutMs: 5000 }), /400/)
})
