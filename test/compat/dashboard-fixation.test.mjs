// Session fixation from a sandbox's page, in a real browser (Debian's
// Chromium, driven by playwright-core) against a real cove server whose
// sandboxes' ports are {port}-{id}.<domain> under the host the dashboard
// is served on (DASHBOARD_HOST, over plain HTTP). ATTACKER_KEY is a key of
// another team, whose sandbox serves the page; DASHBOARD_ARTIFACTS is
// where a failing step's screenshot goes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { Sandbox } from 'e2b';

const base = process.env.E2B_API_URL;
const key = process.env.E2B_API_KEY;
const attackerKey = process.env.ATTACKER_KEY;
const port = new URL(base).port;
const host = process.env.DASHBOARD_HOST;
const dashboard = `http://${host}:${port}/dashboard/`;
let browser, context, page;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  context = await browser.newContext();
  page = await context.newPage();
  page.setDefaultTimeout(30_000);
});

after(async () => { await browser?.close(); });

// step runs one part of the story; a failure leaves a screenshot.
async function step(name, fn) {
  try {
    await fn();
  } catch (err) {
    const dir = process.env.DASHBOARD_ARTIFACTS;
    if (dir && page) {
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `dashboard-fixation-${name.replace(/\W+/g, '-')}.png`);
      await page.screenshot({ path: file, fullPage: true }).catch(() => {});
      err.message += ` (screenshot: ${file})`;
    }
    throw err;
  }
}

// The attacker's sandbox serves a page on a host under the dashboard's
// (8000-<id>.<host>) that plants a cookie of the dashboard's session name
// for the parent domain, holding the attacker's own valid session; the
// victim's browser then opens the dashboard: it is logged into no team,
// and the victim's own login is the victim's team, the planted cookie
// beside it.
test('a session cookie a sandbox\'s page plants logs no one in', async () => {
  const login = await fetch(`${base}/dashboard/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ apiKey: attackerKey }),
  });
  assert.equal(login.status, 200);
  const planted = login.headers.getSetCookie().map((c) => c.split(';')[0]).find((c) => c.startsWith('cove_session='));
  assert.ok(planted, 'the attacker\'s own session cookie');
  const sbx = await Sandbox.create({ apiKey: attackerKey, timeoutMs: 120_000 });
  try {
    await sbx.files.write('/tmp/site/index.html',
      `<script>document.cookie = ${JSON.stringify(`${planted}; Domain=${host}; Path=/dashboard/`)}; document.title = 'planted';</script>`);
    await sbx.commands.run('cd /tmp/site && exec python3 -m http.server 8000', { background: true });

    await step('the sandbox\'s page plants the cookie', async () => {
      const site = `http://8000-${sbx.sandboxId}.${host}:${port}/`;
      for (let i = 0; ; i++) { // until its server listens
        const r = await page.goto(site).catch(() => null);
        if (r && r.ok()) break;
        if (i === 50) throw new Error(`the sandbox's page at ${site} never answered`);
        await new Promise((done) => setTimeout(done, 200));
      }
      await page.waitForFunction(() => document.title === 'planted');
      const cookies = await context.cookies(dashboard);
      assert.deepEqual(cookies.map((c) => `${c.name}=${c.value}`), [planted], 'the browser sends the planted cookie to the dashboard');
    });

    await step('the dashboard is logged into no team', async () => {
      await page.goto(dashboard);
      await page.locator('#api-key').waitFor();
      assert.equal(await page.locator('#top').isVisible(), false, 'the dashboard shows a team');
      const status = await page.evaluate(async () => (await fetch('/dashboard/api/e2b/v2/sandboxes')).status);
      assert.equal(status, 401, 'the API answers as the planted session');
    });

    await step('the victim\'s login is the victim\'s team, the planted cookie beside it', async () => {
      await page.fill('#api-key', key);
      await page.click('#login');
      await page.locator('#sandboxes').waitFor();
      assert.equal(await page.locator('#team').innerText(), 'default');
      assert.equal((await context.cookies(dashboard)).length, 2);
      await page.reload();
      await page.locator('#sandboxes').waitFor();
      assert.equal(await page.locator('#team').innerText(), 'default');
    });
  } finally {
    await sbx.kill().catch(() => {});
  }
});
