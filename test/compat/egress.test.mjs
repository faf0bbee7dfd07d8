// Secrets, workload identity tokens, network rules and an upstream egress
// proxy through the official e2b SDK against a real `cove server`
// (egress_test.go starts it, with a fake upstream at COMPAT_UPSTREAM that
// answers "<host> auth=v1|v2|none|jwt:<token>|other": which secret value
// its Authorization header carried, and a SOCKS5 proxy at COMPAT_SOCKS).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { createPublicKey, verify } from 'node:crypto'
import { Sandbox, Secret } from 'e2b'

const V1 = process.env.COMPAT_SECRET_V1
const V2 = process.env.COMPAT_SECRET_V2
const UPSTREAM = process.env.COMPAT_UPSTREAM
const SOCKS = { address: process.env.COMPAT_SOCKS, username: process.env.COMPAT_SOCKS_USER, password: process.env.COMPAT_SOCKS_PASS }
const name = `upstream-token-${process.pid}`
const api = async (path) => {
  const res = await fetch(`${process.env.E2B_API_URL}${path}`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } })
  return { status: res.status, text: await res.text(), next: res.headers.get('x-next-token') }
}
const sandboxes = []
after(async () => {
  for (const s of sandboxes) await s.kill().catch(() => {})
  for (const n of [name, `${name}-b`]) await Secret.destroy(n).catch(() => {})
})

test('secrets: create, read by id or name, list by pages, update, destroy; no answer holds a value', async () => {
  const info = await Secret.create(name, V1, { metadata: { owner: 'compat' } })
  assert.match(info.secretId, /^sec_/)
  assert.equal(info.name, name)
  assert.equal(info.version, 1)
  assert.deepEqual(info.metadata, { owner: 'compat' })
  assert.ok(info.createdAt instanceof Date && !isNaN(info.createdAt))
  const byId = await Secret.getInfo(info.secretId)
  const byName = await Secret.getInfo(name.toUpperCase()) // names are lower-cased
  assert.equal(byId.secretId, info.secretId)
  assert.equal(byName.secretId, info.secretId)
  await assert.rejects(Secret.create(name, 'again'), /exists/)
  const b = await Secret.create(`${name}-b`, 'another value')
  const seen = []
  const pages = Secret.list({ limit: 1 })
  while (pages.hasNext) {
    for (const s of await pages.nextItems()) seen.push(s.name)
  }
  assert.deepEqual(seen.filter((n) => n.startsWith(name)), [name, `${name}-b`])
  for (const path of ['/secrets', `/secrets/${info.secretId}`, `/secrets/${name}`]) {
    const res = await api(path)
    assert.equal(res.status, 200, path)
    assert.ok(!res.text.includes(V1), `${path} answered with the value`)
  }
  assert.equal(await Secret.exists(b.secretId), true)
  assert.equal(await Secret.destroy(b.secretId), true)
  assert.equal(await Secret.destroy(b.secretId), false)
  assert.equal(await Secret.exists(`${name}-b`), false)
  await assert.rejects(Secret.create('sec_reserved', 'x'), /reserved/)
})

// curl verifies the certificate unless insecure: a transformed name's is
// the node CA's, which the sandbox trusts; any other is the upstream's
// own, of a CA only the server was told of.
const curl = async (sbx, host, insecure = false) => {
  const r = await sbx.commands.run(`curl -sS -m 10 ${insecure ? '-k ' : ''}--resolve ${host}:443:${UPSTREAM} https://${host}/ 2>&1 || true`)
  return r.stdout.trim()
}

const scan = `
import os, sys
want = [v[::-1].encode() for v in sys.argv[1:]]
me = str(os.getpid())
found = []
root_dev = os.stat('/').st_dev
for d, dirs, files in os.walk('/'):
    dirs[:] = [x for x in dirs if os.path.join(d, x) not in ('/proc', '/sys', '/dev') and os.lstat(os.path.join(d, x)).st_dev == root_dev]
    for f in files:
        p = os.path.join(d, f)
        try:
            with open(p, 'rb') as fh:
                data = fh.read(64 << 20)
        except OSError:
            continue
        if any(w in data for w in want):
            found.append(p)
for pid in [p for p in os.listdir('/proc') if p.isdigit() and p != me]:
    for part in ('environ', 'cmdline'):
        try:
            data = open(f'/proc/{pid}/{part}', 'rb').read()
        except OSError:
            continue
        if any(w in data for w in want):
            found.append(f'/proc/{pid}/{part}')
    try:
        maps = open(f'/proc/{pid}/maps').read().splitlines()
        mem = open(f'/proc/{pid}/mem', 'rb', 0)
    except OSError:
        continue
    for line in maps:
        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
        if 'r' not in line.split()[1] or hi - lo > (1 << 30):
            continue
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except (OSError, ValueError, OverflowError):
            continue
        if any(w in data for w in want):
            found.append(f'/proc/{pid}/mem {line}')
print('found: ' + ', '.join(found) if found else 'clean')
`

// scanFor reads, as each user, every file, variable and process memory
// that user can read in the sandbox, and answers what holds one of
// values ("clean": nothing). The script is given the values reversed,
// and skips its own memory, where it turns them around.
const scanFor = async (sbx, values, users = ['root', 'user']) => {
  await sbx.files.write('/tmp/scan.py', scan)
  const reversed = values.map((v) => v.split('').reverse().join(''))
  const out = []
  for (const user of users) { // root may not read the memory of user's processes
    const res = await sbx.commands.run(`python3 /tmp/scan.py ${reversed.join(' ')}`, { user, timeoutMs: 120000 })
    out.push(res.stdout.trim())
  }
  return out
}

test('rules put the secret into matching HTTPS requests, resolved at each request; the sandbox never holds it', async () => {
  const rules = { 'api.upstream.test': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }] }
  const sbx = await Sandbox.create({ network: { allowOut: ['*.upstream.test'], denyOut: ['0.0.0.0/0'], rules } })
  sandboxes.push(sbx)
  // The sandbox's own header is replaced; a name without a rule gets none.
  assert.equal(await curl(sbx, 'api.upstream.test'), 'api.upstream.test auth=v1')
  assert.equal(await curl(sbx, 'other.upstream.test', true), 'other.upstream.test auth=none')
  // An update counts from the next request on.
  const updated = await Secret.update(name, V2)
  assert.equal(updated.version, 2)
  assert.equal(await curl(sbx, 'api.upstream.test'), 'api.upstream.test auth=v2')
  // Runtimes find the node's CA.
  const env = await sbx.commands.run('echo "$NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE"')
  assert.equal(env.stdout.trim(), '/etc/ssl/certs/cove-egress-ca.pem /etc/ssl/certs/ca-certificates.crt')
  // Every file, variable and process memory root and user can read:
  // no value of the secret.
  assert.deepEqual(await scanFor(sbx, [V1, V2]), ['clean', 'clean'])
  // updateNetwork replaces the rules: without them, no header.
  await sbx.updateNetwork({ allowOut: ['*.upstream.test'], denyOut: ['0.0.0.0/0'] })
  assert.equal(await curl(sbx, 'api.upstream.test', true), 'api.upstream.test auth=none')
  await sbx.updateNetwork({ allowOut: ['*.upstream.test'], denyOut: ['0.0.0.0/0'], rules })
  assert.equal(await curl(sbx, 'api.upstream.test'), 'api.upstream.test auth=v2')
  // Rules grant no access: a name outside allowOut stays closed.
  await sbx.updateNetwork({ allowOut: ['other.upstream.test'], denyOut: ['0.0.0.0/0'], rules })
  assert.doesNotMatch(await curl(sbx, 'api.upstream.test'), /auth=/)
})

test('rules are given to a sandbox without them by updateNetwork, which makes it trust the node CA', async () => {
  const sbx = await Sandbox.create()
  sandboxes.push(sbx)
  assert.equal(await curl(sbx, 'api.upstream.test', true), 'api.upstream.test auth=none')
  await sbx.updateNetwork({ rules: { 'api.upstream.test': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }] } })
  assert.equal(await curl(sbx, 'api.upstream.test'), 'api.upstream.test auth=v2')
})

// verifyJWT checks an ES256 token against the key set the API publishes
// and returns its claims.
const verifyJWT = async (token) => {
  const jwks = await (await fetch(`${process.env.E2B_API_URL}/.well-known/jwks.json`)).json()
  const [h, p, s] = token.split('.')
  const header = JSON.parse(Buffer.from(h, 'base64url'))
  assert.equal(header.alg, 'ES256')
  const jwk = jwks.keys.find((k) => k.kid === header.kid)
  assert.ok(jwk, `kid ${header.kid} is in the JWKS`)
  assert.equal(jwk.d, undefined, 'no private part published')
  const ok = verify('sha256', Buffer.from(`${h}.${p}`), { key: createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'))
  assert.equal(ok, true, 'the signature verifies with the published key')
  return JSON.parse(Buffer.from(p, 'base64url'))
}

test('iam: a rule mints the sandbox a workload token per request, which verifies with the published keys', async () => {
  const discovery = await (await fetch(`${process.env.E2B_API_URL}/.well-known/openid-configuration`)).json()
  assert.equal(discovery.jwks_uri, `${discovery.issuer}/.well-known/jwks.json`)
  const sbx = await Sandbox.create({
    iam: { tokens: { aws: Secret.iamToken({ audience: 'sts.upstream.test', tokenType: 'JWT-SVID' }) } },
    network: { rules: { 'api.upstream.test': [{ transform: ({ iam }) => ({ headers: { Authorization: `Bearer ${iam.tokens.aws}` } }) }] } },
  })
  sandboxes.push(sbx)
  const tokens = []
  for (let i = 0; i < 2; i++) {
    const got = await curl(sbx, 'api.upstream.test')
    assert.match(got, /^api\.upstream\.test auth=jwt:/)
    tokens.push(got.slice(got.indexOf('jwt:') + 4))
  }
  assert.notEqual(tokens[0], tokens[1], 'a token per request')
  const claims = await verifyJWT(tokens[0])
  assert.equal(claims.iss, discovery.issuer)
  assert.equal(claims.aud, 'sts.upstream.test')
  assert.match(claims.sub, new RegExp(`^spiffe://[^/]+/team/[^/]+/sandbox/${sbx.sandboxId}$`))
  assert.ok(claims.exp - claims.iat === 300 && Math.abs(claims.iat - Date.now() / 1000) < 60, `5 minutes from now: ${JSON.stringify(claims)}`)
  // The token never was in the sandbox.
  assert.deepEqual(await scanFor(sbx, tokens), ['clean', 'clean'])
  // A fork keeps its parent's rules and tokens, minted as itself.
  const [child] = await sbx.fork({ count: 1 })
  assert.ok(!(child instanceof Error), String(child))
  sandboxes.push(child)
  const fromChild = await curl(child, 'api.upstream.test')
  assert.match(fromChild, /^api\.upstream\.test auth=jwt:/)
  assert.match((await verifyJWT(fromChild.slice(fromChild.indexOf('jwt:') + 4))).sub, new RegExp(`/sandbox/${child.sandboxId}$`))
  // updateNetwork may name only the tokens the create gave.
  await assert.rejects(
    sbx.updateNetwork({ rules: { 'api.upstream.test': [{ transform: { headers: { Authorization: 'Bearer ${e2b.identity.tokens.gcp}' } } }] } }),
    /workload token "gcp"/,
  )
  // Other token types, and rules naming a token the sandbox lacks, are refused at create.
  await assert.rejects(Sandbox.create({ iam: { tokens: { aws: { audience: 'a', tokenType: 'x509-SVID' } } } }), /not supported/)
  await assert.rejects(
    Sandbox.create({ network: { rules: { 'api.upstream.test': [{ transform: { headers: { Authorization: 'Bearer ${e2b.identity.tokens.aws}' } } }] } } }),
    /workload token "aws"/,
  )
})

test('a rule that names a missing secret is refused at create', async () => {
  await assert.rejects(
    Sandbox.create({ network: { rules: { 'api.upstream.test': [{ transform: { headers: { Authorization: Secret.fill('no-such-secret') } } }] } } }),
    /no-such-secret/,
  )
  await assert.rejects(
    Sandbox.create({ network: { rules: { '*': [{ transform: { headers: { A: 'b' } } }] } } }),
    /network\.rules/,
  )
})

test('an upstream SOCKS5 proxy carries the sandbox\'s TCP, rules first; its password is nowhere in the sandbox', async () => {
  const rules = { 'api.upstream.test': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }] }
  const sbx = await Sandbox.create({ network: { egressProxy: SOCKS, allowOut: ['api.upstream.test'], denyOut: ['0.0.0.0/0'], rules } })
  sandboxes.push(sbx)
  assert.equal(await curl(sbx, 'api.upstream.test'), 'api.upstream.test auth=v2')
  // Its details show its egress, never the proxy's password.
  const { network } = await sbx.getInfo()
  assert.deepEqual(network.egressProxy, { address: SOCKS.address, username: SOCKS.username })
  assert.deepEqual(network.rules, rules)
  assert.deepEqual(network.allowOut, ['api.upstream.test'])
  assert.deepEqual(network.denyOut, ['0.0.0.0/0'])
  // Denied names never reach the proxy.
  assert.doesNotMatch(await curl(sbx, 'other.upstream.test', true), /auth=/)
  assert.deepEqual(await scanFor(sbx, [SOCKS.password, V2]), ['clean', 'clean'])
  // A proxy at an address the node may not reach is refused; updateNetwork
  // sets and removes one live.
  await assert.rejects(Sandbox.create({ network: { egressProxy: { address: '127.0.0.1:1080' } } }), /egressProxy/)
  await assert.rejects(sbx.updateNetwork({ egressProxy: { address: '10.0.0.1:1080' } }), /egressProxy/)
  await sbx.updateNetwork({ allowOut: ['api.upstream.test'], denyOut: ['0.0.0.0/0'], rules })
  assert.equal(await curl(sbx, 'api.upstream.test'), 'api.upstream.test auth=v2')
})
