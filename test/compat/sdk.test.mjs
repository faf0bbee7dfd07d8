// The official e2b SDK (npm e2b@2.51.0) against a real `cove server`.
// compat_test.go starts the server and sets E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY, the three variables README.md gives; this file uses
// nothing else.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import os from 'node:os'
import { Sandbox, Volume, CommandExitError, AuthenticationError, TimeoutError, NotFoundError } from 'e2b'

let sbx

before(async () => {
  sbx = await Sandbox.create({ metadata: { suite: 'compat', run: process.env.COMPAT_RUN } })
})

// copiesProcesses: the server's sandboxes keep their processes in a
// snapshot or a fork (the Go test knows its driver and configuration).
const copiesProcesses = process.env.COMPAT_COPIES_PROCESSES === '1'

// The driver a sandbox runs on: Cove's own field of its details.
const isolationOf = async (s) =>
  (await (await fetch(`${process.env.E2B_API_URL}/sandboxes/${s.sandboxId}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })).json()).isolation

after(async () => {
  await sbx?.kill()
})

// A bound on liveness, not a measure: a microVM guest under TCG on a
// loaded 2-core machine took over 20 s to start a Python web server.
const waitUntil = async (cond, ms = 60000) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

test('create answers with an id, a token and the envd version', () => {
  assert.match(sbx.sandboxId, /^i[a-z0-9]{19}$/)
  assert.ok(sbx.sandboxId)
})

test('commands: stdout, stderr and exit codes', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2')
  assert.equal(r.stdout, 'out\n')
  assert.equal(r.stderr, 'err\n')
  assert.equal(r.exitCode, 0)
  await assert.rejects(sbx.commands.run('echo bad >&2; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stderr, 'bad\n')
    return true
  })
})

test('commands: envs, cwd, user, streaming callbacks', async () => {
  const chunks = []
  const r = await sbx.commands.run('echo $GREETING; pwd; whoami', {
    envs: { GREETING: 'hello' }, cwd: '/tmp', user: 'root', onStdout: (d) => chunks.push(d),
  })
  assert.equal(r.stdout, 'hello\n/tmp\nroot\n')
  assert.equal(chunks.join(''), r.stdout)
  const d = await sbx.commands.run('whoami; echo $HOME; pwd')
  assert.equal(d.stdout, 'user\n/home/user\n/home/user\n')
  const n = await sbx.commands.run('node -v && python3 -c "print(6*7)"')
  assert.match(n.stdout, /^v\d+\.\d+\.\d+\n42\n$/)
})

test('commands: timeoutMs ends a long command', async () => {
  const start = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 500 }))
  assert.ok(Date.now() - start < 10000)
  const gone = await waitUntil(async () => !(await sbx.commands.list()).some((p) => p.args?.join(' ').includes('sleep 30')), 5000)
  assert.ok(gone, 'the timed-out command still runs')
})

test('commands: background, connect, sendStdin, kill', async () => {
  const h = await sbx.commands.run('read line; echo got:$line; sleep 60', { background: true, stdin: true })
  assert.ok(h.pid > 0)
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === h.pid))
  let seen = ''
  const c = await sbx.commands.connect(h.pid, { onStdout: (d) => { seen += d } })
  await sbx.commands.sendStdin(h.pid, 'ping\n')
  assert.ok(await waitUntil(() => seen.includes('got:ping')), `connected stream saw ${JSON.stringify(seen)}`)
  assert.equal(await sbx.commands.kill(h.pid), true)
  await assert.rejects(c.wait(), CommandExitError)
  assert.equal(await sbx.commands.kill(999999), false)
})

test('files: text and bytes, list, exists, getInfo, makeDir, rename, remove', async () => {
  await sbx.files.write('/home/user/dir/a.txt', 'alpha')
  const bytes = new Uint8Array([0, 1, 2, 250, 255])
  await sbx.files.write('/home/user/dir/b.bin', bytes)
  assert.equal(await sbx.files.read('/home/user/dir/a.txt'), 'alpha')
  assert.deepEqual(new Uint8Array(await sbx.files.read('/home/user/dir/b.bin', { format: 'bytes' })), bytes)
  assert.equal(await sbx.files.makeDir('/home/user/dir/sub/deeper'), true)
  assert.equal(await sbx.files.makeDir('/home/user/dir/sub/deeper'), false)
  const one = await sbx.files.list('/home/user/dir')
  assert.deepEqual(one.map((e) => e.name).sort(), ['a.txt', 'b.bin', 'sub'])
  const two = await sbx.files.list('/home/user/dir', { depth: 3 })
  assert.ok(two.some((e) => e.path === '/home/user/dir/sub/deeper' && e.type === 'dir'))
  const info = await sbx.files.getInfo('/home/user/dir/a.txt')
  assert.equal(info.size, 5)
  assert.equal(info.type, 'file')
  assert.equal(info.owner, 'user')
  assert.equal(await sbx.files.exists('/home/user/dir/a.txt'), true)
  assert.equal(await sbx.files.exists('/home/user/dir/nope'), false)
  await sbx.files.rename('/home/user/dir/a.txt', '/home/user/dir/c.txt')
  assert.equal(await sbx.files.read('/home/user/dir/c.txt'), 'alpha')
  await sbx.files.remove('/home/user/dir')
  assert.equal(await sbx.files.exists('/home/user/dir'), false)
  await assert.rejects(sbx.files.read('/home/user/missing.txt'), NotFoundError)
})

test('files: symlink targets are absolute, metadata is user.e2b.*, the default user has its own rights', async () => {
  await sbx.files.write('/home/user/meta/target.txt', 'x', { metadata: { author: 'alice' } })
  await sbx.commands.run(
    'cd /home/user/meta && ln -s target.txt link && python3 -c "import os; os.setxattr(\'target.txt\', \'user.e2b.reviewed\', b\'yes\')"'
  )
  const link = await sbx.files.getInfo('/home/user/meta/link')
  assert.equal(link.symlinkTarget, '/home/user/meta/target.txt')
  const info = await sbx.files.getInfo('/home/user/meta/target.txt')
  assert.deepEqual(info.metadata, { author: 'alice', reviewed: 'yes' })
  await sbx.files.write('/home/user/meta/target.txt', 'y')
  assert.equal((await sbx.files.getInfo('/home/user/meta/target.txt')).metadata, undefined)
  // As user: no writing root's files, no listing /root; root may.
  await assert.rejects(sbx.files.write('/etc/hosts', 'mine'), (e) => !(e instanceof NotFoundError) && /denied/i.test(e.message))
  await assert.rejects(sbx.files.list('/root'), /denied/i)
  assert.ok(Array.isArray(await sbx.files.list('/root', { user: 'root' })))
  assert.equal((await sbx.files.getInfo('/etc/hosts')).owner, 'root')
  // A read-only file system is the caller's error with the reason, not a 500.
  await assert.rejects(sbx.files.write('/usr/cove-test', 'x', { user: 'root' }), /read-only/)
})

test('sudo: passwordless for user, no more than root has; python is python3', async () => {
  const run = async (cmd, opts = {}) => {
    try {
      return await sbx.commands.run(cmd, opts)
    } catch (e) {
      if (e instanceof CommandExitError) return e
      throw e
    }
  }
  const r = await run('sudo id -u; sudo -u user id -un; sudo sh -c "exit 3"', { user: 'user' })
  assert.equal(r.stdout, '0\nuser\n')
  assert.equal(r.exitCode, 3)
  assert.equal((await run('echo piped | sudo cat; sudo -i pwd; FOO=kept sudo -E sh -c \'echo $FOO\'; sudo BAR=set sh -c \'echo $BAR $SUDO_USER\'', { user: 'user' })).stdout,
    'piped\n/root\nkept\nset user\n')
  // What sudo gives is what the API's root has: the same capabilities, still no_new_privs.
  const caps = 'grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status'
  assert.equal((await run('sudo ' + caps, { user: 'user' })).stdout, (await run(caps, { user: 'root' })).stdout)
  // Other accounts may not (nobody); a signal reaches the command.
  const nobody = await run(`python3 -c "import os; os.setgroups([]); os.setgid(65534); os.setuid(65534); os.execvp('sudo', ['sudo', 'id'])"`, { user: 'root' })
  assert.notEqual(nobody.exitCode, 0)
  assert.match(nobody.stderr, /may not use sudo/)
  const t0 = Date.now()
  await run('timeout -s INT 1 sudo sleep 30', { user: 'user' })
  assert.ok(Date.now() - t0 < 15000, 'SIGINT did not end sudo sleep')
  assert.equal((await run('python -c "import sys; print(sys.version_info[0])"')).stdout, '3\n')
})

test('sudo on a terminal', async () => {
  let out = ''
  const dec = new TextDecoder()
  const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('sudo -s\n'))
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('echo as-$(id -un)-$(tty | cut -c1-8); exit\n'))
  assert.ok(await waitUntil(() => out.includes('as-root-/dev/pts')), `pty output ${JSON.stringify(out)}`)
  await sbx.pty.kill(t.pid)
})

test('a program inside sees its limits: free, /proc/meminfo, df / and the API agree', async () => {
  const info = await sbx.getInfo()
  const r = await sbx.commands.run(
    `free -m | awk '/^Mem:/ {print $2}'; df -m / | awk 'NR==2 {print $2}'; node -e 'console.log(require("os").totalmem() >> 20)'; python3 -c 'import os; print(os.cpu_count())'; cut -d. -f1 /proc/uptime`
  )
  const [free, df, node, cpus, uptime] = r.stdout.trim().split('\n').map(Number)
  if (await isolationOf(sbx) === 'microvm') {
    // A guest's kernel tells its machine's memory: the limit (its cgroup's,
    // which its processes get) plus the guest's own 96 MiB, less the
    // kernel's share.
    for (const m of [free, node]) assert.ok(m >= info.memoryMB && m <= info.memoryMB + 96, r.stdout)
  } else {
    assert.equal(free, info.memoryMB, r.stdout)
    assert.equal(node, info.memoryMB, r.stdout)
  }
  // diskSizeMB is in the API's answer (the SDK does not map it).
  const raw = await (await fetch(`${process.env.E2B_API_URL}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })).json()
  assert.equal(df, raw.diskSizeMB, r.stdout)
  assert.equal(cpus, info.cpuCount, r.stdout)
  // The sandbox's uptime, not the host's (which has run the build and the
  // server before it); a warm sandbox counts from its start in the pool.
  assert.ok(uptime + 30 < os.uptime(), `uptime ${uptime} s is the host's (${os.uptime()} s)`)
})

test('files: watchDir sees a new file', async () => {
  await sbx.files.makeDir('/home/user/watched')
  const events = []
  const w = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e))
  await sbx.files.write('/home/user/watched/new.txt', 'x')
  assert.ok(await waitUntil(() => events.some((e) => e.name === 'new.txt')), `events ${JSON.stringify(events)}`)
  await w.stop()
})

test('files: uploadUrl and downloadUrl', async () => {
  const up = await sbx.uploadUrl('/home/user/up.txt')
  const form = new FormData()
  form.append('file', new Blob(['uploaded']), 'up.txt')
  const res = await fetch(up, { method: 'POST', body: form })
  assert.equal(res.status, 200, await res.clone().text())
  const down = await sbx.downloadUrl('/home/user/up.txt')
  const got = await fetch(down)
  assert.equal(got.status, 200)
  assert.equal(await got.text(), 'uploaded')
  const bad = new URL(down)
  bad.searchParams.set('signature', 'v1_forged')
  assert.equal((await fetch(bad)).status, 401)
})

test('pty: create, sendInput, resize, kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.resize(t.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'))
  assert.ok(await waitUntil(() => out.includes('30 100') && out.includes('pty-42')), `pty output ${JSON.stringify(out)}`)
  assert.equal(await sbx.pty.kill(t.pid), true)
})

test('getInfo and list: metadata as given, template, startedAfter, state, order and pages', async () => {
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.name, 'base')
  assert.deepEqual(info.metadata, { suite: 'compat', run: process.env.COMPAT_RUN })
  assert.equal(info.state, 'running')
  const run = { run: process.env.COMPAT_RUN }
  const ids = async (query, opts = {}) => (await Sandbox.list({ query: { metadata: run, ...query }, ...opts }).nextItems()).map((s) => s.sandboxId)
  assert.deepEqual(await ids({}), [sbx.sandboxId])
  assert.deepEqual(await ids({ metadata: { run: 'nothing-has-this' } }), [])
  // startedAfter is inclusive: the start time itself finds it, a second later does not.
  assert.deepEqual(await ids({ startedAfter: info.startedAt }), [sbx.sandboxId])
  assert.deepEqual(await ids({ startedAfter: new Date(info.startedAt.getTime() + 1000) }), [])
  assert.deepEqual(await ids({ template: 'base' }), [sbx.sandboxId])
  assert.deepEqual(await ids({ template: 'no-such-template' }), [])
  assert.deepEqual(await ids({ state: ['paused'] }), [])
  assert.deepEqual(await ids({ state: ['running'] }), [sbx.sandboxId])
  // Order by start time and pages of one through the paginator.
  const second = await Sandbox.create({ metadata: run })
  try {
    assert.deepEqual(await ids({}), [second.sandboxId, sbx.sandboxId])
    assert.deepEqual(await ids({}, { order: 'asc' }), [sbx.sandboxId, second.sandboxId])
    const p = Sandbox.list({ query: { metadata: run }, limit: 1 })
    const pages = []
    while (p.hasNext) pages.push((await p.nextItems()).map((s) => s.sandboxId))
    assert.deepEqual(pages, [[second.sandboxId], [sbx.sandboxId]])
  } finally {
    await second.kill()
  }
})

test('setTimeout ends the sandbox on time; isRunning and kill', async () => {
  const s = await Sandbox.create()
  assert.equal(await s.isRunning(), true)
  await s.setTimeout(1000)
  assert.ok(await waitUntil(async () => !(await s.isRunning()), 15000), 'sandbox outlived its timeout')
  await assert.rejects(s.getInfo(), NotFoundError)
  const k = await Sandbox.create()
  assert.equal(await k.kill(), true)
  assert.equal(await k.isRunning(), false)
  assert.equal(await Sandbox.kill(k.sandboxId), false)
})

// getHost(port) names the sandbox's port; the proxy routes by that name
// (this machine does not resolve *.localhost, so the request goes to the
// server's address with the name as its Host).
test('getHost(port) is a URL Node reaches as it is: a server the sandbox runs on 127.0.0.1', async () => {
  await sbx.commands.run('cd /tmp && echo hi-from-port > hello.txt && python3 -m http.server 8080 --bind 127.0.0.1', { background: true })
  const host = sbx.getHost(8080)
  // The server's default domain carries its port; *.localhost resolves to loopback.
  assert.equal(host, `8080-${sbx.sandboxId}.localhost:${new URL(process.env.E2B_API_URL).port}`)
  let got
  assert.ok(await waitUntil(async () => {
    try {
      const res = await fetch(`http://${host}/hello.txt`)
      got = { status: res.status, body: await res.text() }
    } catch (e) {
      got = { error: String(e.cause ?? e) }
    }
    return got.status === 200
  }), `last answer ${JSON.stringify(got)}`)
  assert.equal(got.body, 'hi-from-port\n')
  assert.equal((await fetch(`http://${sbx.getHost(9)}/`)).status, 502)
})

test('network.maskRequestHost: the server in the sandbox sees the Host asked for', async () => {
  const s = await Sandbox.create({ network: { maskRequestHost: 'localhost:${PORT}' } })
  try {
    await s.commands.run(`python3 -c "
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = self.headers['Host'].encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
http.server.HTTPServer(('127.0.0.1', 8081), H).serve_forever()"`, { background: true })
    let host
    assert.ok(await waitUntil(async () => {
      try {
        const res = await fetch(`http://${s.getHost(8081)}/`)
        if (res.status === 200) host = await res.text()
      } catch {}
      return host !== undefined
    }), 'the server did not answer')
    assert.equal(host, 'localhost:8081')
  } finally {
    await s.kill()
  }
})

test('pause and connect: processes go on where they were, a server still serves', async () => {
  const s = await Sandbox.create({ metadata: { pause: process.env.COMPAT_RUN } })
  try {
    await s.commands.run('n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done', { background: true })
    await s.commands.run('cd /tmp && python3 -m http.server 8082 --bind 127.0.0.1', { background: true })
    const url = `http://${s.getHost(8082)}/count`
    // An emulated guest (no KVM) on a loaded machine took over 20 s to start Python's server (CI).
    assert.ok(await waitUntil(async () => { try { return (await fetch(url)).status === 200 } catch { return false } }, 60000))
    const before = Number((await s.commands.run('cat /tmp/count')).stdout)
    assert.equal(await s.pause(), true)
    assert.equal(await s.pause(), false) // 409: paused already
    assert.equal(await s.isRunning(), false)
    assert.equal((await s.getInfo()).state, 'paused')
    const paused = await Sandbox.list({ query: { state: ['paused'], metadata: { pause: process.env.COMPAT_RUN } } }).nextItems()
    assert.deepEqual(paused.map((x) => x.sandboxId), [s.sandboxId])
    await new Promise((r) => setTimeout(r, 1500)) // 30 counts if it were not frozen
    const back = await Sandbox.connect(s.sandboxId)
    assert.equal((await back.getInfo()).state, 'running')
    const after = Number((await back.commands.run('cat /tmp/count')).stdout)
    assert.ok(after >= before && after - before < 20, `the counter went from ${before} to ${after} across a 1.5 s pause`)
    assert.ok(await waitUntil(async () => Number((await back.commands.run('cat /tmp/count')).stdout) > after), 'the counter stopped')
    const res = await fetch(url)
    assert.equal(res.status, 200)
  } finally {
    await s.kill()
  }
})

test('lifecycle: paused at its timeout, resumed by traffic (autoResume) or by connect', async () => {
  // An emulated guest (no KVM) starts Python's server in seconds, not ms.
  const timeoutMs = (await isolationOf(sbx)) === 'microvm' ? 15000 : 3000
  const auto = await Sandbox.create({ timeoutMs, lifecycle: { onTimeout: 'pause', autoResume: true } })
  const manual = await Sandbox.create({ timeoutMs, lifecycle: { onTimeout: 'pause' } })
  try {
    for (const s of [auto, manual]) {
      await s.commands.run('cd /tmp && echo woke > w.txt && python3 -m http.server 8083 --bind 127.0.0.1', { background: true })
    }
    assert.ok(await waitUntil(async () => (await Sandbox.getInfo(auto.sandboxId)).state === 'paused', timeoutMs + 20000), 'not paused at its timeout')
    assert.ok(await waitUntil(async () => (await Sandbox.getInfo(manual.sandboxId)).state === 'paused', timeoutMs + 20000), 'not paused at its timeout')
    assert.deepEqual((await auto.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true })
    // Traffic wakes the auto-resuming one: the request waits, then succeeds.
    const res = await fetch(`http://${auto.getHost(8083)}/w.txt`)
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'woke\n')
    assert.equal((await Sandbox.getInfo(auto.sandboxId)).state, 'running')
    // The other stays paused (502) until connect resumes it.
    assert.equal((await fetch(`http://${manual.getHost(8083)}/w.txt`)).status, 502)
    assert.equal((await Sandbox.getInfo(manual.sandboxId)).state, 'paused')
    await Sandbox.connect(manual.sandboxId, { timeoutMs: 60000 })
    // Its server may still have been starting when it paused (an emulated
    // guest under load): served soon after the resume.
    assert.ok(await waitUntil(async () => (await fetch(`http://${manual.getHost(8083)}/w.txt`)).status === 200), 'not served after connect')
  } finally {
    await auto.kill()
    await manual.kill()
  }
})

test('pause without memory: files kept, processes gone, the same token; reboot and keepMemory: false at the timeout', async () => {
  const s = await Sandbox.create({ metadata: { cold: process.env.COMPAT_RUN } })
  let slowBoot = false // a guest under software emulation: 3 s is too short to write a file in
  try {
    slowBoot = await isolationOf(s) === 'microvm'
    await s.commands.run('mkdir -p /srv/app && echo kept > /srv/app/state', { user: 'root' })
    await s.commands.run('sleep 1000', { background: true })
    assert.equal(await s.pause({ keepMemory: false }), true)
    assert.equal(await s.pause({ keepMemory: false }), false) // 409: paused already
    assert.equal(await s.isRunning(), false)
    assert.equal((await s.getInfo()).state, 'paused')
    const back = await Sandbox.connect(s.sandboxId)
    assert.equal(back.sandboxId, s.sandboxId)
    assert.equal((await back.getInfo()).state, 'running')
    // The same token (the old handle still talks to it); a fresh boot.
    assert.equal((await s.commands.run('cat /srv/app/state')).stdout, 'kept\n')
    assert.equal((await s.commands.run('pgrep -x sleep || echo none')).stdout, 'none\n')
    // A sandbox paused with its memory, brought back with onResume: reboot.
    await s.commands.run('sleep 1000', { background: true })
    assert.equal(await s.pause(), true)
    await Sandbox.connect(s.sandboxId, { onResume: 'reboot' })
    assert.equal((await s.commands.run('cat /srv/app/state; pgrep -x sleep || echo none')).stdout, 'kept\nnone\n')
  } finally {
    await s.kill()
  }
  const t = await Sandbox.create({ timeoutMs: slowBoot ? 15000 : 3000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  try {
    await t.files.write('/home/user/at-timeout.txt', 'saved at the timeout')
    assert.ok(await waitUntil(async () => (await Sandbox.getInfo(t.sandboxId)).state === 'paused', 40000), 'not paused at its timeout')
    await Sandbox.connect(t.sandboxId, { timeoutMs: 60000 })
    assert.equal(await t.files.read('/home/user/at-timeout.txt'), 'saved at the timeout')
  } finally {
    await t.kill()
  }
})

test('snapshots: made from a running sandbox (where the driver can, its processes too), listed, created from, deleted', async () => {
  const s = await Sandbox.create({ envs: { FROM: 'parent' }, metadata: { snap: process.env.COMPAT_RUN } })
  try {
    await s.commands.run('mkdir -p /srv/app && echo v1 > /srv/app/state && rm /etc/e2b', { user: 'root' })
    await s.commands.run('n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done', { background: true })
    assert.ok(await waitUntil(async () => (await s.commands.run('cat /tmp/count 2>/dev/null || true')).stdout.trim() !== ''))
    const name = `snap-${process.env.COMPAT_RUN}`
    const snap = await s.createSnapshot({ name })
    assert.equal(snap.snapshotId, `${name}:default`)
    assert.deepEqual(snap.names, [`${name}:default`])
    // The source goes on.
    const n1 = Number((await s.commands.run('cat /tmp/count')).stdout)
    assert.ok(await waitUntil(async () => Number((await s.commands.run('cat /tmp/count')).stdout) > n1), 'the source stopped')
    await s.commands.run('echo v2 > /srv/app/state', { user: 'root' })
    const unnamed = await Sandbox.createSnapshot(s.sandboxId)
    assert.match(unnamed.snapshotId, /^[a-z0-9]{20}:default$/)
    const mine = await Sandbox.listSnapshots({ sandboxId: s.sandboxId, limit: 1 })
    const first = await mine.nextItems()
    assert.equal(mine.hasNext, true)
    const second = await mine.nextItems()
    assert.deepEqual([...first, ...second].map((x) => x.snapshotId).sort(), [snap.snapshotId, unnamed.snapshotId].sort())
    // Each sandbox from the snapshot starts from its files and environment.
    const [a, b] = await Promise.all([Sandbox.create(snap.snapshotId), Sandbox.create(snap.snapshotId)])
    try {
      for (const c of [a, b]) {
        const r = await c.commands.run('cat /srv/app/state; echo $FROM; test -e /etc/e2b || echo deleted')
        assert.equal(r.stdout, 'v1\nparent\ndeleted\n')
        const counted = async () => Number((await c.commands.run('cat /tmp/count')).stdout)
        const c1 = await counted()
        if (copiesProcesses) {
          // The counter, a shell's memory, runs on from the snapshot.
          assert.ok(c1 > 0)
          assert.ok(await waitUntil(async () => (await counted()) > c1), 'the snapshot\'s counter does not run on')
        } else {
          await new Promise((resolve) => setTimeout(resolve, 300))
          assert.equal(await counted(), c1, 'a process runs in a sandbox from a snapshot of files')
        }
      }
      await a.commands.run('echo changed > /srv/app/state', { user: 'root' })
      assert.equal((await b.commands.run('cat /srv/app/state')).stdout, 'v1\n')
    } finally {
      await a.kill()
      await b.kill()
    }
    assert.equal((await Sandbox.create(unnamed.snapshotId).then(async (c) => {
      try { return (await c.commands.run('cat /srv/app/state')).stdout } finally { await c.kill() }
    })), 'v2\n')
    // A name taken again is E2B's rule (the SDK's CreateSnapshotOpts): a
    // new build of that snapshot's template, which the name starts from now.
    const again = await s.createSnapshot({ name })
    assert.equal(again.snapshotId, snap.snapshotId)
    assert.equal((await Sandbox.create(snap.snapshotId).then(async (c) => {
      try { return (await c.commands.run('cat /srv/app/state')).stdout } finally { await c.kill() }
    })), 'v2\n')
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    assert.equal(await Sandbox.deleteSnapshot(unnamed.snapshotId), true)
    assert.deepEqual(await Sandbox.listSnapshots({ sandboxId: s.sandboxId }).nextItems(), [])
    await assert.rejects(Sandbox.create(snap.snapshotId))
  } finally {
    await s.kill()
  }
  await assert.rejects(Sandbox.createSnapshot(s.sandboxId), NotFoundError)
})

// A web server keeping a count in memory, on 127.0.0.1:8000.
const counterServer = `python3 -c "
import http.server
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        b = str(n).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 8000), H).serve_forever()"`

// count asks a sandbox's counter server for its count (null: no answer).
async function count (s, waitMs = 20000) {
  let n = null
  await waitUntil(async () => {
    try {
      const res = await fetch(`http://${s.getHost(8000)}/`)
      if (res.status === 200) n = await res.text()
    } catch {}
    return n !== null
  }, waitMs)
  return n
}

test('fork: children with the parent\'s files (and, where the driver can, its processes), the parent goes on, a killed parent is not found', async () => {
  const s = await Sandbox.create({ envs: { FROM: 'parent' } })
  try {
    await s.files.write('/home/user/notes.txt', 'forked')
    await s.commands.run(counterServer, { background: true })
    assert.equal(await count(s), '1')
    const kids = await s.fork({ count: 3, timeoutMs: 60000 })
    assert.equal(kids.length, 3)
    try {
      const ids = new Set()
      for (const k of kids) {
        assert.ok(k instanceof Sandbox, String(k))
        ids.add(k.sandboxId)
        assert.equal(await k.files.read('/home/user/notes.txt'), 'forked')
        assert.equal((await k.commands.run('echo $FROM; whoami; echo $E2B_SANDBOX_ID; hostname')).stdout, `parent\nuser\n${k.sandboxId}\n${k.sandboxId}\n`)
        if (copiesProcesses) {
          // The parent's server, its count in memory, goes on in each child.
          assert.equal(await count(k), '2')
          assert.equal(await count(k), '3')
          assert.ok((await k.commands.list()).some((p) => p.args?.join(' ').includes('http.server')))
        } else {
          assert.equal(await count(k, 1000), null)
        }
      }
      assert.equal(ids.size, 3)
      assert.ok(!ids.has(s.sandboxId))
      await kids[0].files.write('/home/user/notes.txt', 'mine')
      assert.equal(await s.files.read('/home/user/notes.txt'), 'forked')
      assert.equal(await kids[1].files.read('/home/user/notes.txt'), 'forked')
    } finally {
      await Promise.all(kids.map((k) => k instanceof Sandbox && k.kill()))
    }
    assert.equal(await s.isRunning(), true)
    assert.equal(await count(s), '2')
  } finally {
    await s.kill()
  }
  await assert.rejects(Sandbox.fork(s.sandboxId), NotFoundError)
})

test('volumes: written through the content API, mounted read-write by sandboxes, kept after them', async () => {
  // The volume content API is the same server: E2B_VOLUME_API_URL says so
  // (the SDK would go to https://api.<domain> otherwise).
  process.env.E2B_VOLUME_API_URL = process.env.E2B_API_URL
  const vol = await Volume.create(`vol-${process.env.COMPAT_RUN}`)
  try {
    await vol.writeFile('/seed.txt', 'from the API')
    await assert.rejects(vol.writeFile('/seed.txt', 'again')) // 409 without force
    await vol.writeFile('/seed.txt', 'from the API', { force: true })
    await vol.makeDir('/a/b', { force: true })
    const a = await Sandbox.create({ volumeMounts: { '/mnt/data': vol } })
    const b = await Sandbox.create({ volumeMounts: { '/data': vol.name } })
    try {
      assert.equal((await a.commands.run('cat /mnt/data/seed.txt')).stdout, 'from the API')
      await a.commands.run('echo shared > /mnt/data/a/b/f.txt')
      assert.equal((await b.commands.run('cat /data/a/b/f.txt; stat -c %U /data/a/b/f.txt')).stdout, 'shared\nuser\n')
      assert.deepEqual((await a.getInfo()).volumeMounts, [{ name: vol.name, path: '/mnt/data' }])
      const opts = (await b.commands.run("grep ' /data ' /proc/self/mounts")).stdout.split(' ')[3].split(',')
      assert.ok(opts.includes('rw') && opts.includes('nosuid'), String(opts)) // nodev too, but gVisor does not list it
    } finally {
      await a.kill()
      await b.kill()
    }
    assert.equal(await vol.readFile('/a/b/f.txt'), 'shared\n')
    const entries = await vol.list('/', { depth: 3 })
    assert.ok(entries.some((e) => e.path === '/a/b/f.txt' && e.type === 'file' && e.uid === 1000), JSON.stringify(entries))
    await vol.updateMetadata('/seed.txt', { mode: 0o600 })
    assert.equal((await vol.getInfo('/seed.txt')).mode, 0o600)
    await vol.remove('/a')
    assert.equal(await vol.exists('/a'), false)
    assert.ok((await Volume.list()).some((v) => v.volumeId === vol.volumeId))
    await assert.rejects(Sandbox.create({ volumeMounts: { '/proc/x': vol } }))
  } finally {
    assert.equal(await Volume.destroy(vol.volumeId), true)
  }
  assert.equal(await Volume.destroy(vol.volumeId), false)
})

test('a wrong API key is refused', async () => {
  await assert.rejects(Sandbox.create({ apiKey: 'e2b_' + 'f'.repeat(40) }), AuthenticationError)
})
