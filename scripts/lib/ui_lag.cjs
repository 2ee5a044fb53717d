#!/usr/bin/env node
// Issue 28's visibility-lag benchmark (run by scripts/ui-lag.sh, beside W1's load): how long
// after an element completes the web UI's page shows it. Headless Chromium (Debian's, driven by
// playwright-core: scripts/install-clients.sh browser) keeps the instance list open, filtered to
// the sampled process; LANES sampled instances at a time, each: created over REST, its job
// activated, and once the page shows the instance active, after a random 0-200 ms, its job
// completed (CompleteJob over REST: the task, and with it the instance, completes). The lag is
// from the completion's answer arriving at this client to the page's DOM showing the instance
// Completed (a MutationObserver in the page; both clocks are this machine's, read as
// performance.timeOrigin + performance.now()).
//   NODE_PATH=$PEERS/node/node_modules node ui_lag.cjs --rest PORT --model one_task.bpmn
//     [--seconds 60] [--lanes 4] [--poll]
// --poll blocks the change events (/ui/api/changes), so the page polls as before issue 28.
// Prints p50/p90/p99/max and one JSON line; exits 1 on a failure.
'use strict'
const fs = require('fs')
const path = require('path')
const { arg, flag, base, sleep, rest, deploy, launch } = require(path.join(__dirname, '../../tests/ui/harness.cjs'))

const SECONDS = Number(arg('seconds', '60'))
const LANES = Number(arg('lanes', '4'))
const POLL = flag('poll')
const now = () => performance.timeOrigin + performance.now()
/** One activation loop hands each job to whoever waits for its instance. */
function jobs() {
  const waiting = new Map() // process instance key -> resolve
  const early = new Map() // process instance key -> job
  let running = true
  const done = (async () => {
    while (running) {
      const r = await rest('POST', '/v2/jobs/activation', { type: 'ui-lag', worker: 'ui-lag', timeout: 60000, maxJobsToActivate: 32, requestTimeout: 200 })
      for (const job of r.jobs) {
        const resolve = waiting.get(job.processInstanceKey)
        if (resolve) {
          waiting.delete(job.processInstanceKey)
          resolve(job)
        } else {
          early.set(job.processInstanceKey, job)
        }
      }
    }
  })()
  return {
    of: (key) => {
      if (early.has(key)) {
        const job = early.get(key)
        early.delete(key)
        return Promise.resolve(job)
      }
      return new Promise((resolve) => waiting.set(key, resolve))
    },
    stop: async () => { running = false; await done },
  }
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

async function main() {
  const xml = fs.readFileSync(arg('model'), 'utf8').replace(/benchmark-task/g, 'ui-lag').replace(/"benchmark"/g, '"ui_lag"')
  await deploy('ui_lag.bpmn', xml)

  const { context, page, profile } = await launch('waggle-ui-lag-', 30000)
  const errors = []
  page.on('pageerror', (e) => errors.push(e.message))
  if (POLL) await page.route('**/ui/api/changes', (r) => r.abort())
  let searches = 0
  page.on('request', (r) => { if (r.url().endsWith('/v2/process-instances/search')) searches++ })
  // the first time each instance's row shows a state, by the page's clock
  await page.addInitScript(() => {
    window.__seen = { ACTIVE: {}, COMPLETED: {} }
    const look = () => {
      const t = performance.timeOrigin + performance.now()
      for (const cell of document.querySelectorAll('tr[data-instance] td.state')) {
        const state = cell.classList.contains('state-COMPLETED') ? 'COMPLETED' : cell.classList.contains('state-ACTIVE') ? 'ACTIVE' : null
        const key = cell.parentElement.dataset.instance
        if (state && !(key in window.__seen[state])) window.__seen[state][key] = t
      }
    }
    new MutationObserver(look).observe(document, { childList: true, subtree: true, characterData: true })
  })
  await page.goto(base + '/instances?process=ui_lag')
  const mode = POLL ? 'polling' : 'live'
  await page.locator('#live', { hasText: new RegExp(`^${mode}$`) }).waitFor({ timeout: 20000 })

  const j = jobs()
  const seen = (state, key) => page.evaluate(([s, k]) => window.__seen[s][k], [state, key])
  async function waitSeen(state, key) {
    const deadline = Date.now() + 30000
    for (;;) {
      const t = await seen(state, key)
      if (t) return t
      if (Date.now() > deadline) throw new Error(`instance ${key} not shown ${state} within 30 s`)
      await sleep(5)
    }
  }
  const lags = []
  const stopAt = Date.now() + SECONDS * 1000
  const started = Date.now()
  const searchesBefore = searches
  async function lane() {
    while (Date.now() < stopAt) {
      const { processInstanceKey: key } = await rest('POST', '/v2/process-instances', { processDefinitionId: 'ui_lag', variables: {} })
      const job = await j.of(key)
      await waitSeen('ACTIVE', key)
      await sleep(Math.random() * 200)
      await rest('POST', `/v2/jobs/${job.jobKey}/completion`, { variables: {} })
      const acked = now()
      lags.push((await waitSeen('COMPLETED', key)) - acked)
    }
  }
  try {
    await Promise.all(Array.from({ length: LANES }, lane))
  } finally {
    await j.stop().catch(() => {})
    await context.close()
    fs.rmSync(profile, { recursive: true, force: true })
  }
  if (errors.length) throw new Error(`errors in the page: ${errors.join('; ')}`)
  const sorted = lags.slice().sort((a, b) => a - b)
  const ms = (x) => Math.round(x * 10) / 10
  const searchesPerSecond = (searches - searchesBefore) / ((Date.now() - started) / 1000)
  const result = {
    mode,
    samples: sorted.length,
    p50: ms(percentile(sorted, 50)),
    p90: ms(percentile(sorted, 90)),
    p99: ms(percentile(sorted, 99)),
    max: ms(sorted[sorted.length - 1]),
    min: ms(sorted[0]),
    searchesPerSecond: ms(searchesPerSecond),
  }
  console.log(`visibility lag (${mode}), ${result.samples} samples: p50 ${result.p50} ms, p90 ${result.p90} ms, p99 ${result.p99} ms, max ${result.max} ms; the page searched ${result.searchesPerSecond} times a second`)
  console.log(JSON.stringify(result))
}

main().catch((e) => {
  console.error(e.stack || String(e))
  process.exit(1)
})
