// The official e2b SDK's template builder (npm e2b@2.51.0) against a real
// `cove server`: E2B's build API, its file uploads and status polling.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Sandbox, Template, waitForFile } from 'e2b'

const dirs = []
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })))

const contextDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cove-compat-tpl-'))
  dirs.push(dir)
  fs.writeFileSync(path.join(dir, 'hello.txt'), 'from the context\n')
  fs.mkdirSync(path.join(dir, 'lib'))
  fs.writeFileSync(path.join(dir, 'lib', 'a.py'), 'A = 1\n')
  return dir
}

const app = (dir) => Template({ fileContextPath: dir })
  .fromTemplate('base')
  .setUser('root')
  .runCmd('mkdir -p /opt/app && echo built > /opt/app/built.txt')
  .copy('hello.txt', '/opt/app/hello.txt', { user: 'user', mode: 0o640 })
  .copy('lib', '/opt/app/lib')
  .setEnvs({ APP_MODE: 'compat' })
  .setWorkdir('/opt/app')
  .setUser('user')
  .setStartCmd('sleep 0.2; touch /tmp/started; sleep 1000', waitForFile('/tmp/started'))

test('Template.build: runCmd, copy, envs, workdir, user, start and ready commands', async () => {
  const dir = contextDir()
  const logs = []
  const info = await Template.build(app(dir), 'compat-tpl', { onBuildLogs: (l) => logs.push(l.message) })
  assert.ok(info.templateId, 'a template id')
  assert.ok(logs.some((m) => m === 'build ready'), `logs: ${logs.join(' | ')}`)
  assert.equal(await Template.exists('compat-tpl'), true)
  assert.equal(await Template.exists('no-such-template'), false)

  const sbx = await Sandbox.create('compat-tpl')
  try {
    const r = await sbx.commands.run('cat built.txt hello.txt lib/a.py; echo $APP_MODE; whoami; pwd; test -f /tmp/started && echo started; stat -c %a hello.txt')
    assert.equal(r.stdout, 'built\nfrom the context\nA = 1\ncompat\nuser\n/opt/app\nstarted\n640\n')
  } finally {
    await sbx.kill()
  }

  // The same template again: every step from the cache, the files not sent twice.
  const again = []
  await Template.build(app(dir), 'compat-tpl', { onBuildLogs: (l) => again.push(l.message) })
  assert.ok(again.filter((m) => m.startsWith('CACHED')).length >= 8, `rebuild logs: ${again.join(' | ')}`)
})

test('Template.build: a failing step rejects with its message', async () => {
  const broken = Template().fromTemplate('base').runCmd('echo before; exit 3')
  await assert.rejects(Template.build(broken, 'compat-broken'), (e) => {
    assert.match(e.message, /exit code 3/)
    return true
  })
})

test('Template.build: a log longer than a status page reaches onBuildLogs whole, in order', async () => {
  // The server answers at most 100 entries a poll: the SDK pages through
  // the rest, the tail after the build ended too.
  const logs = []
  const step = `seq 1 450 # ${Date.now()}` // never from the step cache
  await Template.build(Template().fromTemplate('base').runCmd(step), 'compat-paged', { onBuildLogs: (l) => logs.push(l.message) })
  const numbers = logs.filter((m) => /^\d+$/.test(m)).map(Number)
  assert.deepEqual(numbers, Array.from({ length: 450 }, (_, i) => i + 1), `logs: ${logs.length} lines`)
  assert.ok(logs.includes('build ready'), `logs: ${logs.slice(-5).join(' | ')}`)
})
