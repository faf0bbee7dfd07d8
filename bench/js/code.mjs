// The code interpreter through the official @e2b/code-interpreter SDK:
// Sandbox.create(template) then runCode('1+1'), one sandbox after another
// (cold or pooled, by the server), and runCode('1+1') round trips in one
// warm context. Prints `go test -bench` style lines. The template is a
// template over base that starts the code interpreter, as
// code-interpreter-v1 does, or CODE_TEMPLATE (the real one, built by
// hand: bench/NOTES.md).
import { Sandbox } from '@e2b/code-interpreter'
import { Template } from 'e2b'

const label = process.argv[2] ?? 'pooled'
const n = Number(process.argv[3] ?? 20)
const TEMPLATE = process.env.CODE_TEMPLATE ?? 'bench-code-interpreter'

if (!process.env.CODE_TEMPLATE && !(await Template.exists(TEMPLATE))) {
  await Template.build(
    Template()
      .fromTemplate('base')
      .setStartCmd('sudo /.cove/cove-envd code-interpreter', '/.cove/cove-envd code-interpreter --ready'),
    TEMPLATE,
  )
}

const pct = (samples) => {
  samples.sort((a, b) => a - b)
  const at = (q) => samples[Math.floor(q * (samples.length - 1))].toFixed(2)
  return `${at(0.5)} p50-ms ${at(0.95)} p95-ms ${at(0.99)} p99-ms`
}

// The first create joins the template to the server's warm pool.
await (await Sandbox.create(TEMPLATE, { timeoutMs: 60_000 })).kill()
await new Promise((resolve) => setTimeout(resolve, label === 'pooled' ? 5000 : 0))

const first = []
for (let i = 0; i < n; i++) {
  await new Promise((resolve) => setTimeout(resolve, label === 'pooled' ? 1500 : 150)) // the pool refills
  const start = performance.now()
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 60_000 })
  const exec = await sbx.runCode('1+1')
  if (exec.text !== '2') throw new Error(`1+1 gave ${JSON.stringify(exec)}`)
  first.push(performance.now() - start)
  await sbx.kill()
}
console.log(`BenchmarkE2E/code-interpreter/${label}${process.env.CODE_TEMPLATE ? '/' + TEMPLATE : ''} ${first.length} 0 ns/op ${pct(first)}`)

if (label === 'pooled') {
  const sbx = await Sandbox.create(TEMPLATE, { timeoutMs: 120_000 })
  const rtt = []
  for (let i = 0; i < 10; i++) await sbx.runCode('1+1')
  for (let i = 0; i < 5 * n; i++) {
    const start = performance.now()
    const exec = await sbx.runCode('1+1')
    rtt.push(performance.now() - start)
    if (exec.text !== '2') throw new Error(`1+1 gave ${JSON.stringify(exec)}`)
  }
  console.log(`BenchmarkE2E/code-interpreter/runCode ${rtt.length} 0 ns/op ${pct(rtt)}`)
  const cmd = []
  for (let i = 0; i < 5 * n; i++) {
    const start = performance.now()
    await sbx.commands.run('true')
    cmd.push(performance.now() - start)
  }
  console.log(`BenchmarkE2E/code-interpreter/commands-run ${cmd.length} 0 ns/op ${pct(cmd)}`)
  await sbx.kill()
}
