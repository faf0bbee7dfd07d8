// ComputeSDK's sandbox benchmark protocol through the official e2b SDK:
// time to interactive (TTI) = Sandbox.create() + commands.run('node -v'),
// each sandbox killed after (not timed). Three modes: sequential (one
// after another), staggered (one started every 200 ms) and burst (all at
// once). Top and bottom 5 % of each mode's samples are trimmed; the score
// is 0.6·s(median) + 0.25·s(p95) + 0.15·s(p99), s(x) = 100·(1 − x/10 s),
// times the success rate. The floor is the same command's round trip in
// a sandbox that already runs, at the sequential pace.
//
// The shell mode measures what bounds a command's round trip: E2B's login
// shell (`bash -l -c true`) timed inside a running sandbox, beside
// commands.run('true') through the SDK.
//
// usage: node computesdk.mjs N [modes]   (modes: shell,floor,sequential,staggered,burst)
// Prints `go test -bench` style lines for bench/benchreport.
import { Sandbox } from 'e2b'

const n = Number(process.argv[2] ?? 100)
const modes = (process.argv[3] ?? 'shell,floor,sequential,staggered,burst').split(',')

async function tti() {
  const start = performance.now()
  let sbx
  try {
    sbx = await Sandbox.create({ timeoutMs: 120_000 })
    const r = await sbx.commands.run('node -v')
    if (!r.stdout.startsWith('v')) throw new Error(`node -v printed ${JSON.stringify(r.stdout)}`)
    return { ms: performance.now() - start }
  } catch (err) {
    return { err }
  } finally {
    if (sbx) await sbx.kill().catch(() => {})
  }
}

// trimmed drops the top and bottom 5 % of sorted samples.
function trimmed(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const cut = Math.floor(s.length * 0.05)
  return s.slice(cut, s.length - cut)
}

const at = (s, q) => s[Math.min(s.length - 1, Math.floor(q * (s.length - 1)))]
const score1 = (ms) => Math.max(0, 100 * (1 - ms / 10_000))

function report(name, results, wallMs) {
  const ok = results.filter((r) => r.ms !== undefined).map((r) => r.ms)
  const failed = results.filter((r) => r.err)
  for (const f of failed.slice(0, 3)) console.error(`computesdk ${name}: ${f.err}`)
  const success = ok.length / results.length
  const s = trimmed(ok)
  if (s.length === 0) {
    console.log(`BenchmarkComputeSDK/${name} ${results.length} 0 ns/op 0 success`)
    return
  }
  const [p50, p95, p99] = [at(s, 0.5), at(s, 0.95), at(s, 0.99)]
  const score = (0.6 * score1(p50) + 0.25 * score1(p95) + 0.15 * score1(p99)) * success
  console.log(
    `BenchmarkComputeSDK/${name} ${results.length} 0 ns/op ${p50.toFixed(2)} p50-ms ${p95.toFixed(2)} p95-ms ` +
      `${p99.toFixed(2)} p99-ms ${success.toFixed(3)} success ${score.toFixed(2)} score ${wallMs.toFixed(0)} wall-ms`,
  )
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

for (const mode of modes) {
  const start = performance.now()
  const results = []
  switch (mode) {
    case 'shell': {
      const sbx = await Sandbox.create({ timeoutMs: 300_000 })
      const loop = `for i in $(seq ${n}); do s=$EPOCHREALTIME; bash -l -c true; e=$EPOCHREALTIME; echo "$s $e"; done`
      const r = await sbx.commands.run(loop)
      const shell = r.stdout.trim().split('\n').map((l) => {
        const [s, e] = l.split(' ').map(Number)
        return (e - s) * 1000
      })
      const rtt = []
      for (let i = 0; i < n; i++) {
        const t = performance.now()
        await sbx.commands.run('true')
        rtt.push(performance.now() - t)
      }
      await sbx.kill()
      for (const [name, xs] of [['LoginShell/js-sdk', shell], ['CommandRTT/js-sdk', rtt]]) {
        const s = [...xs].sort((a, b) => a - b)
        console.log(`Benchmark${name} ${s.length} 0 ns/op ${at(s, 0.5).toFixed(2)} p50-ms ${at(s, 0.95).toFixed(2)} p95-ms ${at(s, 0.99).toFixed(2)} p99-ms`)
      }
      continue
    }
    case 'floor': {
      // node -v in one sandbox that runs, at the sequential pace.
      const sbx = await Sandbox.create({ timeoutMs: 300_000 })
      await sbx.commands.run('node -v') // its first command
      for (let i = 0; i < n; i++) {
        const t = performance.now()
        try {
          await sbx.commands.run('node -v')
          results.push({ ms: performance.now() - t })
        } catch (err) {
          results.push({ err })
        }
      }
      await sbx.kill()
      break
    }
    case 'sequential':
      for (let i = 0; i < n; i++) results.push(await tti())
      break
    case 'staggered': {
      const runs = []
      for (let i = 0; i < n; i++) {
        runs.push(tti())
        await sleep(200)
      }
      results.push(...(await Promise.all(runs)))
      break
    }
    case 'burst':
      results.push(...(await Promise.all(Array.from({ length: n }, () => tti()))))
      break
    default:
      throw new Error(`unknown mode ${mode}`)
  }
  report(mode, results, performance.now() - start)
  await sleep(3000) // the pool refills between modes
}
