// Create → first command output through the official e2b SDK:
// Sandbox.create() then commands.run('echo hi'), one sandbox after another.
// Prints one `go test -bench` style line named by the first argument.
import { Sandbox } from 'e2b'

const label = process.argv[2] ?? 'pooled'
const n = Number(process.argv[3] ?? 50)
const samples = []
for (let i = 0; i < n; i++) {
  await new Promise((resolve) => setTimeout(resolve, 150)) // the Go harness's pace
  const start = performance.now()
  const sbx = await Sandbox.create({ timeoutMs: 60_000 })
  const r = await sbx.commands.run('echo hi')
  if (r.stdout !== 'hi\n') throw new Error(`echo printed ${JSON.stringify(r.stdout)}`)
  samples.push(performance.now() - start)
  await sbx.kill()
}
samples.sort((a, b) => a - b)
const at = (q) => samples[Math.floor(q * (samples.length - 1))].toFixed(2)
console.log(`BenchmarkE2E/js-sdk/${label} ${samples.length} 0 ns/op ${at(0.5)} p50-ms ${at(0.95)} p95-ms ${at(0.99)} p99-ms`)
