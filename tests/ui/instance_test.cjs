#!/usr/bin/env node
// The web UI's instance page in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core; both installed by `scripts/install-clients.sh browser`), against a running
// Waggle node: deploys tests/clients/models/ui_tree.bpmn (and the process its call activity
// calls) over REST, runs a worker for its "ui-check" and "ui-ship" jobs (never "ui-approve"),
// starts an instance, waits until it waits in "approve", then in the browser: the taken sequence
// flows are marked on the diagram; the element instance tree nests the subprocess, the
// multi-instance body and its two inner instances, and links the call activity to the instance
// it called; selecting a node highlights its element and shows its scope's variables; an
// activation the engine refuses shows its rejection; a token added at "ship" with a variable;
// the "approve" token moved to "ship", and the instance completing without a reload.
//   NODE_PATH=$PEERS/node/node_modules node instance_test.cjs --rest PORT --models DIR --shots DIR
// Saves a screenshot per step in --shots; prints the instance key as JSON and OK at the end;
// exits 1 with the reason at the first failure.
'use strict'
const fs = require('fs')
const path = require('path')
const { arg, base, check, rest, eventually, deploy, browse } = require('./harness.cjs')
const shots = arg('shots')

async function deployModel(file) {
  await deploy(file, fs.readFileSync(path.join(arg('models'), file)))
}

/** A worker over REST completing the "ui-check" and "ui-ship" jobs. */
function worker() {
  let running = true
  const done = (async () => {
    while (running) {
      for (const type of ['ui-check', 'ui-ship']) {
        const { jobs } = await rest('POST', '/v2/jobs/activation', { type, worker: 'ui-test', timeout: 30000, maxJobsToActivate: 10, requestTimeout: 100 })
        for (const job of jobs) await rest('POST', `/v2/jobs/${job.jobKey}/completion`, { variables: { [`${type}-done`]: true } })
      }
    }
  })()
  return { stop: async () => { running = false; await done } }
}

async function main() {
  fs.mkdirSync(shots, { recursive: true })
  await deployModel('ui_tree_child.bpmn')
  await deployModel('ui_tree.bpmn')
  const w = worker()
  const key = (await rest('POST', '/v2/process-instances', { processDefinitionId: 'ui_tree', variables: { items: [1, 2] } })).processInstanceKey
  const approving = { processInstanceKey: key, elementId: 'approve', state: 'ACTIVE' }
  await eventually(async () => (await rest('POST', '/v2/element-instances/search', { filter: approving })).page.totalItems === 1, 'approve active')
  const child = (await rest('POST', '/v2/process-instances/search', { filter: { parentProcessInstanceKey: key } })).items[0]
  check(child, 'the call activity called an instance')

  await browse(shots, async ({ page, shot }) => {
    const taken = (flow) => page.locator(`g.ui-taken[data-element-id="${flow}"]`)
    const tree = page.locator('ul.tree')
    const flash = page.locator('#flash')
    await page.goto(base + `/instances/${key}`)
    await page.evaluate(() => { window.__sameDocument = true })

    // the flows taken so far are marked, the others not
    for (const f of ['f1', 'f2', 'f3', 'f4', 'f5']) await taken(f).waitFor({ state: 'attached' })
    for (const f of ['f6', 'f7']) check((await taken(f).count()) === 0, `${f} is not taken yet`)
    await shot('taken-flows')

    // the tree: call activity (linked to its called instance), subprocess > multi-instance body
    // > two inner instances, approve active
    const body = tree.locator('li[data-element="sub"] > ul > li[data-element="check"][data-type="MULTI_INSTANCE_BODY"]')
    await body.waitFor()
    await eventually(async () => (await body.locator(':scope > ul > li[data-element="check"][data-type="SERVICE_TASK"][data-state="COMPLETED"]').count()) === 2, 'two inner instances')
    await tree.locator('li[data-element="sub"] > ul > li[data-element="sub_start"]').waitFor()
    await tree.locator('li[data-element="approve"][data-state="ACTIVE"]').waitFor()
    const call = tree.locator('li[data-element="call"][data-state="COMPLETED"]')
    await call.getByRole('link', { name: `Open called instance ${child.processInstanceKey}` }).waitFor()
    check((await tree.locator(':scope > li > ul > li').count()) === 4, 'start, call, sub, approve at the top')
    await shot('element-tree')

    // an inner instance selected: its element highlighted, its variables (the item) only
    await body.locator(':scope > ul > li > button').first().click()
    await page.locator('g.ui-selected[data-element-id="check"]').waitFor()
    await page.locator('tr[data-variable="item"]').waitFor()
    check((await page.locator('tr[data-variable="items"]').count()) === 0, 'only the selected scope\'s variables')
    await shot('scope-selected')

    // approve selected: its token chosen; selected again: all variables
    const approveButton = tree.locator('li[data-element="approve"] > button')
    await approveButton.click()
    await page.locator('g.ui-selected[data-element-id="approve"]').waitFor()
    await page.getByText('No variables in approve.').waitFor()
    const approveKey = await tree.locator('li[data-element="approve"]').getAttribute('data-node')
    check((await page.getByLabel('Token', { exact: true }).inputValue()) === approveKey, 'the selected token is chosen')
    await approveButton.click()
    await page.locator('tr[data-variable="items"]').waitFor()

    // an activation the engine refuses: its rejection is shown
    await page.getByLabel('Target element').selectOption('start')
    await page.getByRole('button', { name: 'Add token' }).click()
    await page.locator("#flash.error").filter({ hasText: /Added a token at start failed: .*not supported/ }).waitFor()
    await shot('rejected')

    // a token added at ship, with a variable: it runs to the end, the instance still waits in approve
    await page.getByLabel('Target element').selectOption('ship')
    await page.getByLabel('Variables of the new token').fill('{"extra": 7}')
    await page.getByRole('button', { name: 'Add token' }).click()
    await flash.filter({ hasText: 'Added a token at ship' }).waitFor()
    await tree.locator('li[data-element="ship"][data-state="COMPLETED"]').waitFor()
    await page.locator('tr[data-variable="extra"] code', { hasText: /^7$/ }).waitFor()
    await taken('f7').waitFor({ state: 'attached' })
    check((await page.locator('#instance-state').textContent()) === 'Active', 'approve still waits')
    await shot('token-added')

    // the approve token moved to ship: the instance completes, without a reload
    await page.getByLabel('Token', { exact: true }).selectOption(approveKey)
    await page.getByRole('button', { name: 'Move token' }).click()
    await flash.filter({ hasText: `Moved token approve ${approveKey} to ship` }).waitFor()
    await page.locator('#instance-state', { hasText: 'Completed' }).waitFor()
    await tree.locator('li[data-element="approve"][data-state="TERMINATED"]').waitFor()
    await eventually(async () => (await tree.locator('li[data-element="ship"][data-state="COMPLETED"]').count()) === 2, 'two ship instances completed')
    check((await taken('f6').count()) === 0, 'f6 was never taken: the token was moved')
    check(await page.evaluate(() => window.__sameDocument === true), 'the page was reloaded')
    await shot('token-moved')
  }, () => w.stop())
  console.log(JSON.stringify({ instance: key, child: child.processInstanceKey }))
  console.log('OK')
}

main().catch((e) => {
  console.error(e.stack || String(e))
  process.exit(1)
})
