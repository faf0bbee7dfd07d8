// Files through the official e2b SDK: files.write then files.read of 1, 50
// and 256 MiB of random bytes in one sandbox, the best of 3 each (throughput,
// not queueing). Prints `go test -bench` style lines for benchreport.
import { Sandbox } from 'e2b'
import { randomBytes } from 'node:crypto'

const sizes = (process.argv[2] ?? '1,50,256').split(',').map(Number)
const sbx = await Sandbox.create({ timeoutMs: 600_000 })
try {
  for (const mib of sizes) {
    const data = randomBytes(mib << 20)
    let up = 0
    let down = 0
    for (let i = 0; i < 3; i++) {
      await sbx.commands.run('rm -f /tmp/blob') // an upload is written beside the file it replaces
      let t = performance.now()
      await sbx.files.write('/tmp/blob', data)
      up = Math.max(up, mib / ((performance.now() - t) / 1000))
      t = performance.now()
      const got = await sbx.files.read('/tmp/blob', { format: 'bytes' })
      down = Math.max(down, mib / ((performance.now() - t) / 1000))
      if (!Buffer.from(got).equals(data)) throw new Error(`the read of ${mib} MiB differs`)
    }
    console.log(`BenchmarkFiles/js-sdk/${mib}MiB 3 0 ns/op ${up.toFixed(1)} upload-MB/s ${down.toFixed(1)} download-MB/s`)
  }
} finally {
  await sbx.kill()
}
