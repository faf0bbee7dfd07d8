// The official @e2b/desktop@2.4.0 against a real `cove server` in E2B's
// domain mode (desktop_test.go): the SDK starts Xvfb and an XFCE session
// through commands, drives them with xdotool, and streams them through
// x11vnc and noVNC to a browser (Debian's Chromium) on the sandbox's URL.
// The template is desktop's recipe over `base` (the host's /usr, where
// make test installs the recipe's Debian packages): DESKTOP_SETUP is its
// last step; DESKTOP_ISOLATION the driver. DESKTOP_ARTIFACTS is where the
// browser's picture goes.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, X509Certificate } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import tls from 'node:tls'
import { chromium } from 'playwright-core'
import { Sandbox } from '@e2b/desktop'
import { Template } from 'e2b'

const TEMPLATE = 'desktop-compat'
const [WIDTH, HEIGHT] = [1280, 800]
let sbx

before(async () => {
  const tpl = Template().fromTemplate('base').runCmd(process.env.DESKTOP_SETUP, { user: 'root' })
  await Template.build(tpl, TEMPLATE)
  sbx = await Sandbox.create(TEMPLATE, { resolution: [WIDTH, HEIGHT], timeoutMs: 600_000, metadata: { 'cove.isolation': process.env.DESKTOP_ISOLATION } })
})

after(async () => {
  if (sbx) await sbx.kill()
})

test('Sandbox.create() asks for the built-in desktop, which says why it cannot be built here', async () => {
  // The test's server has no debootstrap: the recipe is what answers.
  await assert.rejects(Sandbox.create(), /template desktop cannot be built here: debian, which it starts from: .*debootstrap, which is not installed/)
})

test('the display and the XFCE session run at the resolution asked', async () => {
  assert.deepEqual(await sbx.getScreenSize(), { width: WIDTH, height: HEIGHT })
  // Before anything moves it, the pointer is in the middle (E2B's own
  // test expects so).
  assert.deepEqual(await sbx.getCursorPosition(), { x: WIDTH / 2, y: HEIGHT / 2 })
  assert.equal((await sbx.commands.run('echo $DISPLAY')).stdout, ':0\n')
  for (const p of ['Xvfb', 'xfce4-session', 'xfwm4', 'xfdesktop', 'xfce4-panel']) {
    assert.equal((await sbx.commands.run(`pgrep -x ${p} >/dev/null && echo up`)).stdout, 'up\n', p)
  }
})

// pngSize reads a PNG's width and height from its IHDR chunk.
function pngSize(bytes) {
  const b = Buffer.from(bytes)
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG signature')
  assert.equal(b.toString('latin1', 12, 16), 'IHDR')
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) }
}

test('screenshot returns the screen as a PNG, as bytes and as a blob', async () => {
  const bytes = await sbx.screenshot()
  assert.ok(bytes instanceof Uint8Array)
  assert.deepEqual(pngSize(bytes), { width: WIDTH, height: HEIGHT })
  const blob = await sbx.screenshot('blob')
  assert.deepEqual(pngSize(new Uint8Array(await blob.arrayBuffer())), { width: WIDTH, height: HEIGHT })
  // The temporary file is removed (best-effort, after the answer).
  await waitFor(async () => (await sbx.commands.run('ls /tmp | grep -c "^screenshot-" || true')).stdout === '0\n', 'screenshots removed')
})

async function waitFor(check, what, ms = 15_000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 200))
  }
  assert.fail(`timed out waiting for: ${what}`)
}

// xevEvents parses what xev printed: each press or release with its key
// (keysym name) or button, and the pointer's place on the screen.
function xevEvents(log) {
  const events = []
  for (const block of log.split('\n\n')) {
    const head = block.match(/^(KeyPress|KeyRelease|ButtonPress|ButtonRelease|MotionNotify) event/)
    if (!head) continue
    const at = block.match(/root:\((-?\d+),(-?\d+)\)/)
    const e = { type: head[1], x: Number(at[1]), y: Number(at[2]) }
    const key = block.match(/keysym 0x[0-9a-f]+, ([^)]+)\)/)
    if (key) e.key = key[1]
    const button = block.match(/button (\d+),/)
    if (button) e.button = Number(button[1])
    events.push(e)
  }
  return events
}

test('the mouse and the keyboard reach a window, and its id and title read back', async () => {
  // xev, a real X client, logs every event its window receives.
  await sbx.commands.run(`xev -geometry 400x300+200+150 -name cove-probe -event keyboard -event button -event mouse > /tmp/xev.log 2>&1`,
    { background: true, timeoutMs: 0 })
  let probe
  await waitFor(async () => (probe = (await sbx.commands.run('xdotool search --onlyvisible --name cove-probe || true')).stdout.trim()) !== '', 'the xev window')
  // xev names no class; getApplicationWindows finds windows by theirs.
  await sbx.commands.run(`xdotool set_window --class cove-probe-class ${probe}`)
  // Screen points inside the window (at 200,150, 400×300, decorations
  // aside); xev reports where each event was on the screen too.
  await sbx.leftClick(300, 250) // focuses it
  assert.deepEqual(await sbx.getCursorPosition(), { x: 300, y: 250 })
  await sbx.write("Hi cove's")
  await sbx.press('enter')
  await sbx.press(['ctrl', 'a'])
  await sbx.rightClick()
  await sbx.middleClick()
  await sbx.doubleClick()
  await sbx.scroll('down', 2)
  await sbx.scroll('up')
  await sbx.drag([260, 220], [520, 380])

  assert.deepEqual(await sbx.getApplicationWindows('cove-probe-class'), [probe])
  assert.equal(await sbx.getWindowTitle(probe), 'cove-probe')
  assert.equal(await sbx.getCurrentWindowId(), probe, 'the clicked window has the focus')

  let events
  await waitFor(async () => {
    events = xevEvents(await sbx.files.read('/tmp/xev.log'))
    return events.filter((e) => e.type === 'ButtonRelease').length >= 9
  }, 'the last release')
  const keys = events.filter((e) => e.type === 'KeyPress').map((e) => e.key)
  assert.deepEqual(keys, ['Shift_L', 'H', 'i', 'space', 'c', 'o', 'v', 'e', 'apostrophe', 's', 'Return', 'Control_L', 'a'])
  const buttons = events.filter((e) => e.type === 'ButtonPress').map((e) => e.button)
  assert.deepEqual(buttons, [1, 3, 2, 1, 1, 5, 5, 4, 1])
  const presses = events.filter((e) => e.type === 'ButtonPress')
  assert.deepEqual([presses[0].x, presses[0].y], [300, 250], 'the click where it was asked')
  const last = events.filter((e) => e.type === 'ButtonRelease').at(-1)
  assert.deepEqual([presses.at(-1).x, presses.at(-1).y, last.x, last.y], [260, 220, 520, 380], 'the drag from and to')
  assert.ok(events.some((e) => e.type === 'MotionNotify' && e.x === 520 && e.y === 380), 'the drag moved the pointer')
})

test('launch and open start the applications the desktop names', async () => {
  // A desktop entry of the user's that records how it was started, and
  // the default for text files.
  await sbx.files.write('/home/user/.local/share/applications/cove-probe.desktop',
    '[Desktop Entry]\nType=Application\nName=Cove probe\nExec=sh -c \'echo "$0" >> /tmp/probe.log\' %f\nMimeType=text/plain;\n')
  await sbx.files.write('/home/user/.config/mimeapps.list', '[Default Applications]\ntext/plain=cove-probe.desktop\n')
  await sbx.files.write('/home/user/note.txt', 'a note')
  await sbx.launch('cove-probe', '/home/user/launched.txt')
  await waitFor(async () => (await sbx.files.exists('/tmp/probe.log')), 'launch')
  await sbx.open('/home/user/note.txt')
  await waitFor(async () => (await sbx.files.read('/tmp/probe.log')).includes('note.txt'), 'open')
  assert.deepEqual((await sbx.files.read('/tmp/probe.log')).trim().split('\n'), ['/home/user/launched.txt', '/home/user/note.txt'])
})

// leafSPKI is the base64 SHA-256 of the public key of the certificate the
// server presents for host, once Node has verified it against the
// server's CA (NODE_EXTRA_CA_CERTS): Chromium trusts that key alone.
function leafSPKI(host, port) {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port, servername: host }, () => {
      const cert = new X509Certificate(sock.getPeerCertificate().raw)
      sock.end()
      resolve(createHash('sha256').update(cert.publicKey.export({ type: 'spki', format: 'der' })).digest('base64'))
    })
    sock.on('error', reject)
  })
}

test('the stream: noVNC on the sandbox URL shows the desktop in a browser, and its password guards it', async () => {
  await sbx.stream.start()
  await assert.rejects(sbx.stream.start(), /Stream is already running/)
  const url = sbx.stream.getUrl()
  const host = `6080-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`
  assert.ok(url.startsWith(`https://${host}/vnc.html?`), url)
  assert.equal(new URL(url).searchParams.get('autoconnect'), 'true')

  const [hostname, port] = host.split(':')
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', `--ignore-certificate-errors-spki-list=${await leafSPKI(hostname, Number(port))}`],
  })
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
    page.setDefaultTimeout(30_000)
    await page.goto(url)
    await page.waitForSelector('html.noVNC_connected')
    const shot = Buffer.from(await sbx.screenshot()).toString('base64')
    // The browser's canvas against the sandbox's own screenshot, pixel by
    // pixel, once the first frame has arrived: the same screen but for
    // the clock and the pointer.
    // Compared by 16×16 blocks' mean colours: noVNC asks for JPEG at its
    // default quality, whose errors average out over a block.
    let same
    await waitFor(async () => {
      same = await page.evaluate(async (png) => {
        const canvas = document.querySelector('#noVNC_container canvas')
        const img = new Image()
        img.src = 'data:image/png;base64,' + png
        await img.decode()
        const ref = document.createElement('canvas')
        ref.width = img.width
        ref.height = img.height
        const rc = ref.getContext('2d')
        rc.drawImage(img, 0, 0)
        const w = img.width
        const a = rc.getImageData(0, 0, w, img.height).data
        const b = canvas.getContext('2d').getImageData(0, 0, w, img.height).data
        let blocks = 0
        let equal = 0
        for (let by = 0; by + 16 <= img.height; by += 16) {
          for (let bx = 0; bx + 16 <= w; bx += 16) {
            const diff = [0, 0, 0]
            for (let y = by; y < by + 16; y++) {
              for (let x = bx; x < bx + 16; x++) {
                for (let c = 0; c < 3; c++) diff[c] += a[(y * w + x) * 4 + c] - b[(y * w + x) * 4 + c]
              }
            }
            blocks++
            if (diff.every((d) => Math.abs(d) / 256 < 6)) equal++
          }
        }
        return { equal: equal / blocks, size: [canvas.width, canvas.height] }
      }, shot)
      return same.equal > 0.98
    }, 'the stream to show the screen', 30_000).catch((err) => {
      err.message += ` (last: ${JSON.stringify(same)})`
      throw err
    }).finally(async () => {
      if (process.env.DESKTOP_ARTIFACTS) {
        mkdirSync(process.env.DESKTOP_ARTIFACTS, { recursive: true })
        await page.screenshot({ path: join(process.env.DESKTOP_ARTIFACTS, 'desktop-stream.png') })
        writeFileSync(join(process.env.DESKTOP_ARTIFACTS, 'desktop-screenshot.png'), Buffer.from(shot, 'base64'))
      }
    })
    assert.deepEqual(same.size, [WIDTH, HEIGHT])
    await page.close()

    // With requireAuth, a new password: the URL without it asks for one,
    // the URL with it connects.
    await sbx.stream.stop()
    await sbx.stream.start({ requireAuth: true })
    const key = sbx.stream.getAuthKey()
    assert.match(key, /^[A-Za-z0-9]{16}$/)
    const guarded = await browser.newPage()
    guarded.setDefaultTimeout(30_000)
    await guarded.goto(sbx.stream.getUrl())
    await guarded.waitForSelector('#noVNC_credentials_dlg.noVNC_open')
    assert.equal(await guarded.$('html.noVNC_connected'), null)
    await guarded.goto(sbx.stream.getUrl({ authKey: key }))
    await guarded.waitForSelector('html.noVNC_connected')
    await sbx.stream.stop()
  } finally {
    await browser.close()
  }
})
