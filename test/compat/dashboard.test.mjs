// The dashboard in a real browser (Debian's Chromium, driven by
// playwright-core) against a real cove server, with a sandbox created
// through the official E2B SDK. DASHBOARD_ARTIFACTS is where a failing
// step's screenshot goes; DASHBOARD_SCREENSHOT, when set, is where the
// sandbox's page is saved (the README's picture).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { Sandbox } from 'e2b';

const base = process.env.E2B_API_URL;
const key = process.env.E2B_API_KEY;
let browser, page;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
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
      const file = join(dir, `dashboard-${name.replace(/\W+/g, '-')}.png`);
      await page.screenshot({ path: file, fullPage: true }).catch(() => {});
      err.message += ` (screenshot: ${file})`;
    }
    throw err;
  }
}

async function apiStatus(apiKey) {
  const r = await fetch(`${base}/v2/sandboxes`, { headers: { 'X-API-Key': apiKey } });
  return r.status;
}

test('the dashboard, from login to kill', async () => {
  await step('a wrong key is refused', async () => {
    await page.goto(`${base}/dashboard`);
    await page.locator('#api-key').waitFor();
    assert.equal(await page.locator('#top').isVisible(), false, 'the navigation shows before a login');
    await page.fill('#api-key', 'e2b_' + '7'.repeat(40));
    await page.click('#login');
    await page.locator('#login-error').filter({ hasText: 'invalid API key' }).waitFor();
    assert.deepEqual(await page.context().cookies(), []);
  });

  await step('the right key logs in', async () => {
    await page.fill('#api-key', key);
    await page.click('#login');
    await page.locator('#sandboxes').waitFor();
    const cookies = await page.context().cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0].httpOnly, true);
    assert.equal(cookies[0].sameSite, 'Strict');
    assert.equal(cookies[0].path, '/dashboard/');
    assert.ok(!cookies[0].value.includes(key), 'the key is not in the cookie');
  });

  const sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { owner: '<b>dash</b>' } });
  const row = page.locator(`#sandboxes tbody tr[data-id="${sbx.sandboxId}"]`);
  try {
    await step('a sandbox made through the SDK appears', async () => {
      await row.waitFor();
      assert.match(await row.innerText(), /owner=<b>dash<\/b>/); // shown as text, not HTML
      await page.fill('#f-metadata', 'owner=nobody');
      await row.waitFor({ state: 'detached' });
      await page.fill('#f-metadata', 'owner=<b>dash</b>');
      await row.waitFor();
    });

    await step('its page', async () => {
      await row.locator('a').click();
      await page.locator('#sb-state', { hasText: 'running' }).waitFor();
    });

    await step('a terminal runs a command', async () => {
      await page.click('#open-terminal');
      await page.locator('.xterm-rows', { hasText: '$' }).waitFor(); // the prompt
      await page.locator('.xterm-helper-textarea').focus();
      await page.keyboard.type('echo dash-$((6*7))');
      await page.keyboard.press('Enter');
      await page.locator('.xterm-rows', { hasText: 'dash-42' }).waitFor();
    });

    await step('its chart fills, on axes with values, and its logs show', async () => {
      await page.waitForFunction(() => Number(document.querySelector('#cpu-chart').dataset.points || 0) >= 3);
      for (const id of ['#cpu-chart', '#mem-chart']) {
        const y = await page.locator(`${id} text.y`).allTextContents();
        const x = await page.locator(`${id} text.x`).allTextContents();
        assert.equal(y.length, 3, `${id}: its values' scale`);
        assert.match(y[2], id === '#cpu-chart' ? /^100 %$/ : /^\d+ MiB$/);
        assert.equal(x.length, 2, `${id}: its times`);
        assert.match(x[0], /\d+:\d\d:\d\d/);
      }
      await page.locator('#sb-logs', { hasText: 'process started' }).waitFor();
      if (process.env.DASHBOARD_SCREENSHOT) await page.screenshot({ path: process.env.DASHBOARD_SCREENSHOT });
    });

    await step('kill from the page, once confirmed', async () => {
      page.once('dialog', (d) => d.dismiss());
      await page.click('#sb-actions button[data-act="kill"]');
      await page.locator('#sb-actions button[data-act="kill"]:not([disabled])').waitFor();
      assert.equal((await Sandbox.connect(sbx.sandboxId)).sandboxId, sbx.sandboxId, 'a kill called off killed');
      page.once('dialog', (d) => d.accept());
      await page.click('#sb-actions button[data-act="kill"]');
      await page.locator('#sandboxes').waitFor();
      await row.waitFor({ state: 'detached' });
      await assert.rejects(Sandbox.connect(sbx.sandboxId), /not found/i);
    });
  } finally {
    await sbx.kill().catch(() => {});
  }

  await step('a key made on the page works until it is revoked there', async () => {
    await page.goto(`${base}/dashboard/#/keys`);
    await page.fill('#key-name', 'from the browser');
    await page.click('#create-key');
    const newKey = (await page.locator('#new-key-value').innerText()).trim();
    assert.match(newKey, /^e2b_[0-9a-f]{40}$/);
    await page.locator('#keys', { hasText: 'from the browser' }).waitFor();
    // Masked as the CLI shows it, never used yet.
    const row = await page.locator('#keys tr', { hasText: 'from the browser' }).innerText();
    assert.ok(row.includes(`e2b_${newKey.slice(4, 6)}…${newKey.slice(-4)}`) && row.includes('never') && !row.includes(newKey), row);
    assert.equal(await apiStatus(newKey), 200);
    await page.locator('#keys tr', { hasText: 'from the browser' }).locator('button[data-revoke]').click();
    await page.waitForFunction(() => !document.querySelector('#keys').textContent.includes('from the browser'));
    assert.equal(await apiStatus(newKey), 401);
  });

  await step('the team\'s usage: the killed sandbox ran on base', async () => {
    await page.goto(`${base}/dashboard/#/usage`);
    await page.locator('#usage tr', { hasText: 'base' }).waitFor();
    await page.locator('#now', { hasText: 'running now' }).waitFor();
  });

  await step('nodes and templates', async () => {
    await page.goto(`${base}/dashboard/#/nodes`);
    await page.locator('#nodes', { hasText: 'namespaces' }).waitFor();
    // Warm sandboxes by template name; the table fits the page.
    await page.locator('#nodes [data-warm]', { hasText: /base: \d/ }).waitFor();
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'the nodes table overflows the page');
    await page.goto(`${base}/dashboard/#/templates`);
    const baseRow = page.locator('#templates tbody tr', { hasText: 'base' }).first();
    await baseRow.waitFor();
    // base was made when its layer first was on this node: its Updated
    // is a date of this year, not year 1.
    assert.match((await baseRow.locator('td').last().innerText()).trim(), new RegExp(`/${String(new Date().getFullYear()).slice(2)}, `));
  });

  await step('log out', async () => {
    await page.click('#logout');
    await page.locator('#api-key').waitFor();
    await page.goto(`${base}/dashboard/#/sandboxes`);
    await page.locator('#api-key').waitFor();
  });
});

// A build in progress is cancelled from its template's page (Cove's own
// call: E2B has none): its status turns to error, the log says why.
test('a build in progress is cancelled from its template\'s page', async () => {
  const call = async (method, path, body) => {
    const r = await fetch(`${base}${path}`, { method, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) });
    return { status: r.status, data: await r.json().catch(() => null) };
  };
  const { data: created } = await call('POST', '/v3/templates', { name: 'dashboard-cancel', memoryMB: 128 });
  const build = `/templates/${created.templateID}/builds/${created.buildID}`;
  assert.equal((await call('POST', `/v2${build}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: ['echo sleeping; sleep 600'] }] })).status, 202);
  await step('cancel a build', async () => {
    await page.goto(`${base}/dashboard`);
    await page.fill('#api-key', key);
    await page.click('#login');
    await page.locator('#sandboxes').waitFor();
    await page.goto(`${base}/dashboard/#/template/${created.templateID}`);
    await page.locator('#build-log', { hasText: 'sleeping' }).waitFor();
    page.once('dialog', (d) => d.accept());
    await page.click(`#builds button[data-cancel="${created.buildID}"]`);
    await page.locator('#builds tbody tr', { hasText: 'error' }).waitFor();
    await page.locator('#build-log', { hasText: 'cancelled' }).waitFor();
    assert.equal(await page.locator('#builds button[data-cancel]').count(), 0, 'a Cancel button is left');
    await page.click('#logout');
    await page.locator('#api-key').waitFor();
  });
  const { data: st } = await call('GET', `${build}/status`);
  assert.equal(st.status, 'error');
  assert.match(st.reason.message, /cancelled/);
  assert.equal((await call('DELETE', `/templates/${created.templateID}`)).status, 204);
});

// The goal's figure: the list renders 1000 sandboxes, measured in the
// page (rendering only: the rows come from the test, not the API).
test('the sandbox list renders 1000 sandboxes', async () => {
  await page.goto(`${base}/dashboard`);
  await page.fill('#api-key', key);
  await page.click('#login');
  await page.locator('#sandboxes').waitFor();
  const ms = await page.evaluate(async () => {
    const now = new Date();
    const list = Array.from({ length: 1000 }, (_, i) => ({
      sandboxID: `i${String(i).padStart(19, '0')}`, templateID: 'base', alias: 'base', isolation: 'namespaces', state: i % 7 ? 'running' : 'paused',
      cpuCount: 2, memoryMB: 512, startedAt: now.toISOString(), endAt: new Date(+now + 300_000).toISOString(), metadata: { owner: `user-${i % 13}` },
    }));
    const times = [];
    let rows = 0;
    for (let r = 0; r < 5; r++) {
      const t0 = performance.now();
      window.coveRenderSandboxes(list);
      rows = document.querySelectorAll('#sandboxes tbody tr').length;
      document.body.getBoundingClientRect(); // layout
      await new Promise((done) => requestAnimationFrame(() => setTimeout(done))); // painted
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return { ms: times[2], rows };
  });
  assert.equal(ms.rows, 1000);
  console.log(`dashboard: 1000 sandboxes rendered in ${ms.ms.toFixed(1)} ms (median of 5)`);
});
