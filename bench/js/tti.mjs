// Time to interactive through the official e2b SDK: Sandbox.create() then
// commands.run('node -v'). Prints one `go test -bench` style line.
import { Sandbox } from 'e2b'

const n = Number(process.argv[2] ?? 50)
const samples = []
for (let i = 0; i < n; i++) {
  const start = performance.now()
  const sbx = await Sandbox.create({ timeoutMs: 60_000 })
  await sbx.commands.run('node -v')
  samples.push(performance.now() - start)
  await sbx.kill()
}
samples.sort((a, b) => a - b)
const at = (q) => samples[Math.floor(q * (samples.length - 1))].toFixed(2)
console.log(`BenchmarkTTI/js-sdk ${samples.length} 0 ns/op ${at(0.5)} p50-ms ${at(0.95)} p95-ms ${at(0.99)} p99-ms`)
