// The official e2b SDK in E2B's domain mode: only E2B_DOMAIN and
// E2B_API_KEY are set (domain_test.go), so every call is HTTPS to
// api.<domain> or <port>-<id>.<domain>.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

test('create, commands, files, getHost and kill over HTTPS', async () => {
  assert.equal(process.env.E2B_API_URL, undefined)
  const sbx = await Sandbox.create()
  try {
    assert.equal((await sbx.commands.run('echo over-tls')).stdout, 'over-tls\n')
    await sbx.files.write('/home/user/tls.txt', 'secure')
    assert.equal(await sbx.files.read('/home/user/tls.txt'), 'secure')
    await sbx.commands.run('cd /tmp && echo port-over-tls > p.txt && python3 -m http.server 8080 --bind 127.0.0.1', { background: true })
    const url = `https://${sbx.getHost(8080)}/p.txt`
    assert.match(url, new RegExp(`^https://8080-${sbx.sandboxId}\\.${process.env.E2B_DOMAIN.replace('.', '\\.')}/`))
    let body
    for (let i = 0; i < 100 && body === undefined; i++) {
      try {
        const res = await fetch(url)
        if (res.status === 200) body = await res.text()
      } catch {}
      if (body === undefined) await new Promise((r) => setTimeout(r, 50))
    }
    assert.equal(body, 'port-over-tls\n')
    assert.equal((await Sandbox.list({ query: { state: ['running'] } }).nextItems()).some((s) => s.sandboxId === sbx.sandboxId), true)
  } finally {
    assert.equal(await sbx.kill(), true)
  }
  // A sandbox that is gone answers as E2B's proxy does.
  const res = await fetch(`https://49983-${sbx.sandboxId}.${process.env.E2B_DOMAIN}/health`)
  assert.equal(res.status, 502)
  assert.deepEqual(await res.json(), { message: 'The sandbox was not found', sandboxId: sbx.sandboxId, code: 502 })
})
