#!/usr/bin/env node
// The web UI in a real headless Chromium (Debian's `chromium`, driven by playwright-core; both
// installed by `scripts/install-clients.sh browser`), against a running Waggle node:
// deploys tests/clients/models/ui_payment.bpmn over REST, runs a worker that fails the
// "ui-charge" job while the card is "declined", starts four instances, then in the browser sees
// the diagram with its badges (the pages live by server-sent events), filters the instance list
// by element and by a variable's value, opens an instance with an incident, edits the variable, retries,
// watches the instance complete without a reload, cancels another from the list and a third
// through the list's selection; the incidents page groups the incidents.
//   NODE_PATH=$PEERS/node/node_modules node ui_test.cjs --rest PORT --models DIR --shots DIR
// Saves a screenshot per step in --shots; prints the instance keys as JSON and OK at the end;
// exits 1 with the reason at the first failure.
'use strict'
const fs = require('fs')
const path = require('path')
const { arg, base, check, rest, eventually, deploy, browse } = require('./harness.cjs')
const shots = arg('shots')

/** A worker over REST: fails the job (no retries left: an incident) while `card` is "declined". */
function worker() {
  let running = true
  const done = (async () => {
    while (running) {
      const { jobs } = await rest('POST', '/v2/jobs/activation', { type: 'ui-charge', worker: 'ui-test', timeout: 30000, maxJobsToActivate: 10, requestTimeout: 300 })
      for (const job of jobs) {
        if (job.variables.card === 'declined') {
          await rest('POST', `/v2/jobs/${job.jobKey}/failure`, { retries: 0, errorMessage: `card declined for ${job.variables.amount}` })
        } else {
          await rest('POST', `/v2/jobs/${job.jobKey}/completion`, { variables: { receipt: `r-${job.jobKey}` } })
        }
      }
    }
  })()
  return { stop: async () => { running = false; await done } }
}

async function main() {
  fs.mkdirSync(shots, { recursive: true })
  const deployed = await deploy('ui_payment.bpmn', fs.readFileSync(path.join(arg('models'), 'ui_payment.bpmn')))
  const definitionKey = deployed.deployments[0].processDefinition.processDefinitionKey

  const w = worker()
  const start = async (variables) => (await rest('POST', '/v2/process-instances', { processDefinitionId: 'ui_payment', variables })).processInstanceKey
  const repaired = await start({ amount: 500, card: 'declined' })
  const canceled = await start({ amount: 300, card: 'declined' })
  const bulkCanceled = await start({ amount: 400, card: 'declined' })
  const waived = await start({ amount: 20 })
  const charged = await start({ amount: 150, card: 'valid' })
  const search = (filter) => rest('POST', '/v2/process-instances/search', { filter })
  await eventually(async () => (await search({ processDefinitionId: 'ui_payment', hasIncident: true })).page.totalItems === 3, 'three incidents')
  await eventually(async () => (await search({ processDefinitionId: 'ui_payment', state: 'COMPLETED' })).page.totalItems === 2, 'two completed instances')

  await browse(shots, async ({ page, shot }) => {
    const badge = (element, kind, n) => page.locator(`.badge-${kind}[data-element="${element}"]`, { hasText: new RegExp(`^${n}$`) }).waitFor()
    // the processes
    await page.goto(base + '/')
    await page.getByRole('link', { name: 'Open ui_payment version 1' }).waitFor()
    // the page follows the store by server-sent events, not by polling
    await page.locator('#live', { hasText: /^live$/ }).waitFor()
    await shot('processes')
    await page.getByRole('link', { name: 'Open ui_payment version 1' }).click()
    await page.waitForURL(`**/processes/${definitionKey}`)

    // the diagram with its badges, and bpmn.io's watermark
    await badge('charge', 'incidents', 3)
    await badge('waived', 'completed', 1)
    await badge('charged', 'completed', 1)
    await badge('charge', 'completed', 1)
    check(await page.locator('.bjs-powered-by').isVisible(), 'the bpmn.io watermark is visible')
    check((await page.locator('#count-incidents').textContent()) === '3', 'three instances with an incident')
    await shot('diagram-badges')

    // the incidents, grouped by error type and process
    await page.getByRole('link', { name: 'Incidents', exact: true }).click()
    await page.locator('tr[data-group="JOB_NO_RETRIES|ui_payment"] td.num', { hasText: /^3$/ }).waitFor()
    await page.getByRole('button', { name: 'Retry all JOB_NO_RETRIES incidents of ui_payment' }).waitFor()
    await shot('incidents')

    // the instances with an incident; open one
    await page.getByRole('link', { name: 'Instances', exact: true }).click()
    await page.getByLabel('Process', { exact: true }).selectOption('ui_payment')
    await page.getByLabel('With incident only').check()
    await page.locator('#page-info', { hasText: '3 instances' }).waitFor()
    await shot('instances-with-incident')

    // the list filtered by element: an incident at "charge", then "charge" completed
    await page.getByLabel('With incident only').uncheck()
    await page.getByLabel('Element', { exact: true }).fill('charge')
    await page.getByLabel('Element state').selectOption('incident')
    await page.locator('#page-info', { hasText: /· 3 instances$/ }).waitFor()
    await page.getByLabel('Element state').selectOption('completed')
    await page.locator('#page-info', { hasText: /· 1 instances$/ }).waitFor()
    await page.locator(`tr[data-instance="${charged}"]`).waitFor()
    check(new URL(page.url()).searchParams.get('element') === 'charge', 'the element filter is in the address')
    await shot('instances-by-element')

    // and by a variable's value: the declined cards, then the amount of 500
    await page.getByLabel('Element', { exact: true }).fill('')
    await page.getByLabel('Variable name').fill('card')
    await page.getByLabel('Variable value').fill('declined')
    await page.locator('#page-info', { hasText: /· 3 instances$/ }).waitFor()
    await page.getByLabel('Variable name').fill('amount')
    await page.getByLabel('Variable value').fill('500')
    await page.locator('#page-info', { hasText: /· 1 instances$/ }).waitFor()
    await page.locator(`tr[data-instance="${repaired}"]`).waitFor()
    await shot('instances-by-variable')
    await page.getByRole('link', { name: `Open instance ${repaired}` }).click()
    await page.waitForURL(`**/instances/${repaired}`)

    // its incident
    await page.locator('[data-incident]', { hasText: 'card declined for 500' }).waitFor()
    await page.locator('g.ui-incident[data-element-id="charge"]').waitFor()
    await page.evaluate(() => { window.__sameDocument = true })
    await shot('instance-incident')

    // edit the variable
    await page.getByRole('button', { name: 'Edit variable card' }).click()
    await page.getByLabel('New value of card').fill('"valid"')
    await page.getByRole('button', { name: 'Save variable card' }).click()
    await page.locator('tr[data-variable="card"] code', { hasText: '"valid"' }).waitFor()
    await shot('variable-edited')

    // retry, and the instance completes by itself
    await page.getByRole('button', { name: /^Retry incident / }).click()
    await page.locator('#instance-state', { hasText: 'Completed' }).waitFor()
    await page.getByText('No active incidents.').waitFor()
    await page.locator('tr[data-variable="receipt"]').waitFor()
    check(await page.evaluate(() => window.__sameDocument === true), 'the page was reloaded')
    await shot('instance-completed')

    // cancel another from the list
    await page.goto(base + '/instances?process=ui_payment')
    await page.evaluate(() => { window.__sameDocument = true })
    await page.getByRole('button', { name: `Cancel instance ${canceled}` }).click()
    await page.locator(`tr[data-instance="${canceled}"] td.state`, { hasText: 'Canceled' }).waitFor()
    check(await page.evaluate(() => window.__sameDocument === true), 'the list was reloaded')
    await shot('instance-canceled')

    // and one more through the selection
    await page.getByLabel(`Select instance ${bulkCanceled}`).check()
    await page.locator('#selected-count', { hasText: '1 selected' }).waitFor()
    await page.getByRole('button', { name: 'Cancel selected instances' }).click()
    await page.locator(`tr[data-instance="${bulkCanceled}"] td.state`, { hasText: 'Canceled' }).waitFor()
    check(await page.evaluate(() => window.__sameDocument === true), 'the list was reloaded')
    await shot('bulk-canceled')

    // the diagram's badges follow
    await page.goto(base + `/processes/${definitionKey}`)
    await badge('charged', 'completed', 2)
    await badge('charge', 'canceled', 2)
    check((await page.locator('.badge-incidents[data-element="charge"]').count()) === 0, 'no incident left on the diagram')
    await shot('diagram-after')
  }, () => w.stop())
  console.log(JSON.stringify({ repaired, canceled, bulkCanceled, waived, charged }))
  console.log('OK')
}

main().catch((e) => {
  console.error(e.stack || String(e))
  process.exit(1)
})
