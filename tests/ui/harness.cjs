// What the browser scripts share (tests/ui/ui_test.cjs, tests/ui/instance_test.cjs,
// scripts/lib/ui_lag.cjs): their command-line arguments, REST calls against the node under test,
// waiting for a condition, deploying a model, and launching Debian's headless Chromium through
// playwright-core (both installed by `scripts/install-clients.sh browser`).
'use strict'
const fs = require('fs')
const os = require('os')
const path = require('path')
const { chromium } = require('playwright-core')

const argv = process.argv.slice(2)
/** The value after `--name` on the command line, or `dflt` when `--name` is not given. */
const arg = (name, dflt) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : dflt)
/** Whether the flag `--name` is on the command line. */
const flag = (name) => argv.includes(`--${name}`)
const base = `http://127.0.0.1:${arg('rest')}`
/** How long one step may wait for the page or the node. */
const STEP_MS = 20000

function check(condition, message) {
  if (!condition) throw new Error(message)
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A REST call with an optional JSON body; its parsed answer, or an error naming the status. */
async function rest(method, p, body) {
  const init = { method, headers: {} }
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  const r = await fetch(base + p, init)
  const text = await r.text()
  check(r.ok, `${method} ${p}: ${r.status} ${text}`)
  return text ? JSON.parse(text) : null
}

/** Polls `probe` every 100 ms until it gives a truthy value (returned), for at most STEP_MS. */
async function eventually(probe, what) {
  const deadline = Date.now() + STEP_MS
  for (;;) {
    const value = await probe()
    if (value) return value
    check(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(100)
  }
}

/** Deploys one BPMN resource over REST v2; the deployment's answer. */
async function deploy(name, xml) {
  const form = new FormData()
  form.append('resources', new Blob([xml], { type: 'application/xml' }), name)
  const r = await fetch(base + '/v2/deployments', { method: 'POST', body: form })
  const text = await r.text()
  check(r.ok, `deployment of ${name}: ${r.status} ${text}`)
  return JSON.parse(text)
}

/** Headless Chromium with a fresh profile (a directory the caller removes): its context, first
 * page (with `timeoutMs` as the default timeout) and profile. */
async function launch(profilePrefix, timeoutMs = STEP_MS) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), profilePrefix))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-background-timer-throttling', '--disable-renderer-backgrounding'],
  })
  const page = context.pages()[0] || (await context.newPage())
  page.setDefaultTimeout(timeoutMs)
  return { context, page, profile }
}

/** Runs `steps({ page, shot })` in a fresh headless Chromium: `shot(name)` saves the next numbered
 * full-page screenshot in `shotsDir`. Fails on any error the page threw; on a failure saves a
 * last `failure` screenshot. Always closes the browser, removes its profile and runs `cleanup`. */
async function browse(shotsDir, steps, cleanup = async () => {}) {
  const { context, page, profile } = await launch('waggle-ui-chromium-')
  const errors = []
  page.on('pageerror', (e) => errors.push(e.message))
  let step = 0
  const shot = async (name) => {
    const file = path.join(shotsDir, `${String(++step).padStart(2, '0')}-${name}.png`)
    await page.screenshot({ path: file, fullPage: true })
    console.log(`screenshot ${file}`)
  }
  try {
    await steps({ page, shot })
    check(errors.length === 0, `errors in the page: ${errors.join('; ')}`)
  } catch (e) {
    await shot('failure').catch(() => {})
    throw e
  } finally {
    await context.close()
    fs.rmSync(profile, { recursive: true, force: true })
    await cleanup()
  }
}

module.exports = { arg, flag, base, STEP_MS, check, sleep, rest, eventually, deploy, launch, browse }
