// Waggle's web UI: fills the page frame from the JSON endpoints and refreshes it when the query
// store changes (server-sent events from /ui/api/changes; polling every second when they are not
// available); no page reload. Commands go to the REST API (/v2) and /ui/api.
'use strict';
(function () {
  const POLL_MS = 1000;
  // while live, a refresh at least this often anyway (commits another node exported)
  const LIVE_SAFETY_MS = 5000;
  // after the event stream was refused or closed for good, the next try
  const LIVE_RETRY_MS = 5000;
  const PAGE_SIZE = 20;
  const app = document.getElementById('app');
  const view = app.dataset.view;
  const key = app.dataset.key;

  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const date = (iso) => (iso ? esc(iso.replace('T', ' ').replace('Z', '')) : '');
  const STATE_LABEL = { ACTIVE: 'Active', COMPLETED: 'Completed', TERMINATED: 'Canceled' };
  const stateLabel = (s) => STATE_LABEL[s] || s || '';

  async function api(method, path, body) {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    if (!r.ok) {
      let detail = r.status + ' ' + r.statusText;
      try {
        const p = await r.json();
        detail = p.detail || p.title || detail;
      } catch (_) { /* not a problem document */ }
      throw new Error(detail);
    }
    if (r.status === 204) return null;
    return (r.headers.get('content-type') || '').includes('json') ? r.json() : r.text();
  }

  const flashBox = document.getElementById('flash');
  function flash(message, ok) {
    flashBox.className = ok ? 'ok' : 'error';
    flashBox.textContent = message;
  }

  const liveBox = document.getElementById('live');
  function live(on) {
    liveBox.className = 'live ' + (on ? 'on' : 'off');
    liveBox.textContent = on ? (changes.connected() ? 'live' : 'polling') : 'disconnected';
  }

  /**
   * The store's changes as server-sent events (/ui/api/changes): `subscribe(f)` calls f after
   * each event (the server sends at most ten a second), and when the stream connects or drops
   * (to catch up, or to fall back to polling). A hidden tab closes its stream (a browser opens
   * only six connections to a server) and reopens it when shown again.
   */
  const changes = (() => {
    const subscribers = new Set();
    let source = null;
    let connected = false;
    let retry = null;
    const notify = () => { for (const f of subscribers) f(); };
    function close() {
      if (source) source.close();
      source = null;
      if (connected) {
        connected = false;
        notify();
      }
    }
    function open() {
      clearTimeout(retry);
      if (source || document.hidden || !window.EventSource) return;
      source = new EventSource('/ui/api/changes');
      source.addEventListener('hello', () => {
        connected = true;
        notify();
      });
      source.addEventListener('change', notify);
      source.onerror = () => {
        // CONNECTING: the browser reconnects by itself; CLOSED (refused): poll, try again later
        const closed = source.readyState === EventSource.CLOSED;
        if (connected) {
          connected = false;
          notify();
        }
        if (closed) {
          source = null;
          retry = setTimeout(open, LIVE_RETRY_MS);
        }
      };
    }
    document.addEventListener('visibilitychange', () => (document.hidden ? close() : open()));
    window.addEventListener('pagehide', close);
    open();
    return { subscribe: (f) => subscribers.add(f), connected: () => connected };
  })();

  /**
   * Runs `refresh` now, then after each change of the store (a change during a run makes one
   * more run after it, never two at once), or every POLL_MS after the previous run ended while
   * the change events are not available. Returns a function that refreshes at once.
   */
  function poll(refresh) {
    let timer = null;
    let running = false;
    let again = false;
    async function tick() {
      if (running) {
        again = true;
        return;
      }
      running = true;
      clearTimeout(timer);
      try {
        await refresh();
        live(true);
      } catch (e) {
        live(false);
        console.warn('refresh failed', e);
      }
      running = false;
      if (again) {
        again = false;
        tick();
        return;
      }
      timer = setTimeout(tick, changes.connected() ? LIVE_SAFETY_MS : POLL_MS);
    }
    changes.subscribe(tick);
    tick();
    return tick; // call to refresh at once (after a command)
  }

  /** An action button's handler: runs `f`, reports its outcome, refreshes. */
  async function act(label, f, refreshNow) {
    try {
      await f();
      flash(label, true);
    } catch (e) {
      flash(label + ' failed: ' + e.message, false);
    }
    if (refreshNow) refreshNow();
  }

  /** Sets an element's HTML only when it differs (a refresh that changes nothing leaves the
   * page alone: a click or a selection in progress is not lost). */
  function setHtml(el, html) {
    if (el.dataset.html !== html) {
      el.innerHTML = html;
      el.dataset.html = html;
    }
  }

  /** A variable value typed in a filter as the JSON text the store holds: JSON as given (made
   * compact), anything else as a string (`declined` is `"declined"`). */
  function jsonText(text) {
    try {
      return JSON.stringify(JSON.parse(text));
    } catch (_) {
      return JSON.stringify(text);
    }
  }

  function section(parent, html) {
    const div = document.createElement('div');
    div.innerHTML = html;
    parent.appendChild(div);
    return div;
  }

  // ---- the diagram: bpmn-js's NavigatedViewer, badges and markers as overlays ----
  function Diagram(container) {
    const viewer = new window.BpmnJS({ container });
    let loaded = null;
    let lastBadges = '';
    let markers = new Map(); // element id -> class
    return {
      viewer,
      async load(definitionKey) {
        if (loaded === definitionKey) return;
        const xml = await api('GET', `/v2/process-definitions/${definitionKey}/xml`);
        await viewer.importXML(xml);
        viewer.get('canvas').zoom('fit-viewport', 'auto');
        loaded = definitionKey;
        lastBadges = '';
        markers = new Map();
      },
      has(id) {
        return !!viewer.get('elementRegistry').get(id);
      },
      /** counts: {elementId: {active, incidents, completed, canceled}} */
      badges(counts) {
        const text = JSON.stringify(counts);
        if (text === lastBadges) return;
        lastBadges = text;
        const overlays = viewer.get('overlays');
        overlays.remove({ type: 'badge' });
        for (const [id, c] of Object.entries(counts)) {
          if (!this.has(id)) continue;
          const spans = ['active', 'incidents', 'completed', 'canceled']
            .filter((k) => c[k] > 0)
            .map((k) => `<span class="badge badge-${k}" data-element="${esc(id)}" data-kind="${k}" title="${esc(id)}: ${c[k]} ${k}" aria-label="${esc(id)}: ${c[k]} ${k}">${c[k]}</span>`)
            .join('');
          if (spans) overlays.add(id, 'badge', { position: { top: -12, left: -8 }, html: `<div class="badges">${spans}</div>` });
        }
      },
      /** wanted: Map(elementId -> marker class) */
      mark(wanted) {
        const canvas = viewer.get('canvas');
        for (const [id, cls] of markers) {
          if (wanted.get(id) !== cls) canvas.removeMarker(id, cls);
        }
        for (const [id, cls] of wanted) {
          if (markers.get(id) !== cls && this.has(id)) canvas.addMarker(id, cls);
        }
        markers = new Map([...wanted].filter(([id]) => this.has(id)));
      },
    };
  }

  const LEGEND = `<div class="legend" aria-label="Legend">
    <span><span class="badge badge-active">n</span> active</span>
    <span><span class="badge badge-incidents">n</span> with incident</span>
    <span><span class="badge badge-completed">n</span> completed</span>
    <span><span class="badge badge-canceled">n</span> canceled</span></div>`;

  const countCells = (c) => {
    c = c || { active: 0, incidents: 0, completed: 0, canceled: 0 };
    return `<td class="num">${c.active}</td><td class="num">${c.incidents}</td><td class="num">${c.completed}</td><td class="num">${c.canceled}</td>`;
  };

  // ---- Processes: every definition with its versions and instance counts ----
  function processes() {
    const body = section(app, '<p class="muted">Loading…</p>');
    poll(async () => {
      const { definitions, counts } = await api('GET', '/ui/api/processes');
      if (!definitions.length) {
        setHtml(body, '<p>No process is deployed yet.</p>');
        return;
      }
      const rows = definitions.map((d) => {
        const name = d.name ? `${esc(d.name)} <span class="muted mono">${esc(d.processDefinitionId)}</span>` : `<span class="mono">${esc(d.processDefinitionId)}</span>`;
        return `<tr data-process="${esc(d.processDefinitionId)}" data-version="${d.version}">
          <td>${name}</td>
          <td><a href="/processes/${esc(d.processDefinitionKey)}" aria-label="Open ${esc(d.processDefinitionId)} version ${d.version}">version ${d.version}</a></td>
          ${countCells(counts[d.processDefinitionKey])}
          <td><a href="/instances?process=${encodeURIComponent(d.processDefinitionId)}&version=${d.version}" aria-label="Instances of ${esc(d.processDefinitionId)} version ${d.version}">instances</a></td></tr>`;
      });
      setHtml(body, `<table aria-label="Process definitions"><thead><tr><th>Process</th><th>Version</th>
        <th>Active</th><th>With incident</th><th>Completed</th><th>Canceled</th><th></th></tr></thead>
        <tbody>${rows.join('')}</tbody></table>`);
    });
  }

  // ---- One process definition: the diagram with badges ----
  function process() {
    const head = section(app, '');
    const canvas = section(app, '');
    canvas.className = 'diagram';
    canvas.setAttribute('aria-label', 'Process diagram');
    section(app, LEGEND);
    const diagram = Diagram(canvas);
    poll(async () => {
      const { definition: d, counts, elements } = await api('GET', `/ui/api/processes/${key}`);
      const c = counts || {};
      const title = d.name || d.processDefinitionId;
      app.querySelector('h1').textContent = `${title} (version ${d.version})`;
      head.innerHTML = `<div class="summary" aria-label="Instances">
          <span>Active: <b id="count-active">${c.active || 0}</b></span>
          <span>With incident: <b id="count-incidents">${c.incidents || 0}</b></span>
          <span>Completed: <b id="count-completed">${c.completed || 0}</b></span>
          <span>Canceled: <b id="count-canceled">${c.canceled || 0}</b></span>
          <a href="/instances?process=${encodeURIComponent(d.processDefinitionId)}&version=${d.version}">Show instances</a></div>`;
      await diagram.load(d.processDefinitionKey);
      diagram.badges(elements);
    });
  }

  // ---- Instances: filters, paging, cancel ----
  function instances() {
    const params = new URLSearchParams(location.search);
    const f = {
      process: params.get('process') || '',
      version: params.get('version') || '',
      state: params.get('state') || '',
      incident: params.get('incident') === 'true',
      from: params.get('from') || '',
      until: params.get('until') || '',
      element: params.get('element') || '',
      elementState: params.get('elementState') || '',
      variable: params.get('variable') || '',
      value: params.get('value') || '',
      page: Math.max(0, parseInt(params.get('page') || '0', 10) || 0),
    };
    const form = section(app, `<form class="filters" aria-label="Filters">
      <label>Process <select name="process" aria-label="Process"><option value="">All processes</option></select></label>
      <label>Version <select name="version" aria-label="Version"><option value="">All versions</option></select></label>
      <label>State <select name="state" aria-label="State">
        <option value="">Any state</option><option value="ACTIVE">Active</option>
        <option value="COMPLETED">Completed</option><option value="TERMINATED">Canceled</option></select></label>
      <label>Started from <input type="date" name="from" aria-label="Started from"></label>
      <label>Started until <input type="date" name="until" aria-label="Started until"></label>
      <label><span><input type="checkbox" name="incident" aria-label="With incident only"> with incident only</span></label>
      <label>Element <input name="element" list="element-ids" aria-label="Element" placeholder="element id" autocomplete="off"></label>
      <datalist id="element-ids"></datalist>
      <label>Element state <select name="elementState" aria-label="Element state">
        <option value="">Any</option><option value="active">Active</option><option value="incident">With incident</option>
        <option value="completed">Completed</option><option value="canceled">Canceled</option></select></label>
      <label>Variable <input name="variable" aria-label="Variable name" placeholder="name" autocomplete="off"></label>
      <label>Value <input name="variableValue" aria-label="Variable value" placeholder='JSON: "text", 42' autocomplete="off"></label>
    </form>`).firstElementChild;
    const bulk = section(app, `<div class="filters" aria-label="Selection">
      <span id="selected-count">0 selected</span>
      <button type="button" class="danger" data-bulk="cancel" aria-label="Cancel selected instances">Cancel selected</button>
      <button type="button" data-bulk="retry" aria-label="Retry incidents of selected instances">Retry selected</button></div>`);
    const selected = new Set();
    const list = section(app, '<p class="muted">Loading…</p>');
    let definitions = [];

    function fillSelects() {
      const ids = [...new Set(definitions.map((d) => d.processDefinitionId))];
      form.process.innerHTML = '<option value="">All processes</option>' + ids.map((id) => `<option value="${esc(id)}">${esc(id)}</option>`).join('');
      form.process.value = f.process;
      const versions = definitions.filter((d) => d.processDefinitionId === f.process).map((d) => d.version);
      form.version.innerHTML = '<option value="">All versions</option>' + versions.map((v) => `<option value="${v}">${v}</option>`).join('');
      form.version.value = f.version;
      form.version.disabled = !f.process;
      form.state.value = f.state;
      form.incident.checked = f.incident;
      form.from.value = f.from;
      form.until.value = f.until;
      if (document.activeElement !== form.element) form.element.value = f.element;
      form.elementState.value = f.elementState;
      form.elementState.disabled = !f.element;
      if (document.activeElement !== form.variable) form.variable.value = f.variable;
      if (document.activeElement !== form.variableValue) form.variableValue.value = f.value;
      elementIds().catch((e) => console.warn('element ids', e));
    }

    // the element ids of the chosen process version (those with element instances) to pick from
    let elementIdsOf = null;
    async function elementIds() {
      const d = definitions.find((x) => x.processDefinitionId === f.process && String(x.version) === f.version)
        || definitions.find((x) => x.processDefinitionId === f.process);
      const k = d ? d.processDefinitionKey : null;
      if (k === elementIdsOf) return;
      elementIdsOf = k;
      const ids = k ? Object.keys((await api('GET', `/ui/api/processes/${k}`)).elements || {}).sort() : [];
      form.querySelector('#element-ids').innerHTML = ids.map((id) => `<option value="${esc(id)}"></option>`).join('');
    }

    function syncUrl() {
      const q = new URLSearchParams();
      if (f.process) q.set('process', f.process);
      if (f.process && f.version) q.set('version', f.version);
      if (f.state) q.set('state', f.state);
      if (f.incident) q.set('incident', 'true');
      if (f.from) q.set('from', f.from);
      if (f.until) q.set('until', f.until);
      if (f.element) q.set('element', f.element);
      if (f.element && f.elementState) q.set('elementState', f.elementState);
      if (f.variable) q.set('variable', f.variable);
      if (f.variable && f.value) q.set('value', f.value);
      if (f.page) q.set('page', String(f.page));
      history.replaceState(null, '', '/instances' + (q.toString() ? '?' + q : ''));
    }

    let refreshNow = null;
    function filtersChanged(e) {
      if (e.target.name === 'process') f.version = '';
      else if (e.target.name === 'version') f.version = form.version.value;
      f.process = form.process.value;
      f.state = form.state.value;
      f.incident = form.incident.checked;
      f.from = form.from.value;
      f.until = form.until.value;
      f.element = form.element.value.trim();
      f.elementState = form.elementState.value;
      f.variable = form.variable.value.trim();
      f.value = form.variableValue.value.trim();
      f.page = 0;
      fillSelects();
      syncUrl();
      refreshNow();
    }
    form.addEventListener('change', filtersChanged);
    // the text filters apply as they are typed, once typing pauses
    let typing = null;
    form.addEventListener('input', (e) => {
      if (e.target.tagName !== 'INPUT' || e.target.type === 'checkbox' || e.target.type === 'date') return;
      clearTimeout(typing);
      typing = setTimeout(() => filtersChanged(e), 300);
    });
    form.addEventListener('submit', (e) => e.preventDefault());

    function showSelection() {
      bulk.querySelector('#selected-count').textContent = `${selected.size} selected`;
    }

    list.addEventListener('change', (e) => {
      const box = e.target;
      if (box.dataset.select) {
        if (box.checked) selected.add(box.dataset.select);
        else selected.delete(box.dataset.select);
      } else if (box.dataset.selectAll) {
        for (const b of list.querySelectorAll('input[data-select]')) {
          b.checked = box.checked;
          if (box.checked) selected.add(b.dataset.select);
          else selected.delete(b.dataset.select);
        }
      }
      showSelection();
    });

    bulk.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b || !selected.size) return;
      const keys = [...selected];
      if (b.dataset.bulk === 'cancel') {
        act(`Canceled ${keys.length} instance(s)`, async () => {
          const failed = [];
          for (const k of keys) {
            try {
              await api('POST', `/v2/process-instances/${k}/cancellation`);
            } catch (err) {
              failed.push(`${k}: ${err.message}`);
            }
          }
          selected.clear();
          showSelection();
          if (failed.length) throw new Error(failed.join('; '));
        }, refreshNow);
      } else if (b.dataset.bulk === 'retry') {
        act(`Retried the incidents of ${keys.length} instance(s)`, async () => {
          const r = await api('POST', '/v2/incidents/search', {
            filter: { processInstanceKey: { $in: keys }, state: 'ACTIVE' },
            page: { limit: 10000 },
          });
          for (const n of r.items) await api('POST', `/ui/api/incidents/${n.incidentKey}/retry`);
          selected.clear();
          showSelection();
        }, refreshNow);
      }
    });

    list.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.dataset.cancel) {
        b.disabled = true;
        act(`Canceled instance ${b.dataset.cancel}`, () => api('POST', `/v2/process-instances/${b.dataset.cancel}/cancellation`), refreshNow);
      } else if (b.dataset.page) {
        f.page = Math.max(0, f.page + Number(b.dataset.page));
        syncUrl();
        refreshNow();
      }
    });

    refreshNow = poll(async () => {
      if (!definitions.length) {
        definitions = (await api('GET', '/ui/api/processes')).definitions;
        fillSelects();
      }
      const filter = {};
      if (f.process) filter.processDefinitionId = f.process;
      if (f.process && f.version) filter.processDefinitionVersion = Number(f.version);
      if (f.state) filter.state = f.state;
      if (f.incident) filter.hasIncident = true;
      const started = {};
      if (f.from) started.$gte = `${f.from}T00:00:00Z`;
      if (f.until) started.$lt = new Date(Date.parse(`${f.until}T00:00:00Z`) + 86400000).toISOString();
      if (Object.keys(started).length) filter.startDate = started;
      // 8.8's element filter (Operate's flow-node filter) and variable filter
      if (f.element) {
        filter.elementId = f.element;
        const state = { active: ['ACTIVE', false], incident: ['ACTIVE', true], completed: ['COMPLETED'], canceled: ['TERMINATED'] }[f.elementState];
        if (state) filter.elementInstanceState = state[0];
        if (state && state.length > 1) filter.hasElementInstanceIncident = state[1];
      }
      if (f.variable) filter.variables = [{ name: f.variable, value: f.value ? jsonText(f.value) : { $exists: true } }];
      const r = await api('POST', '/v2/process-instances/search', {
        filter,
        sort: [{ field: 'processInstanceKey', order: 'DESC' }],
        page: { from: f.page * PAGE_SIZE, limit: PAGE_SIZE },
      });
      // past 10,000 matches the count stops (hasMoreTotalItems): "10000+"
      const total = r.page.totalItems;
      const more = r.page.hasMoreTotalItems ? '+' : '';
      const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
      const rows = r.items.map((i) => `<tr data-instance="${esc(i.processInstanceKey)}">
        <td><input type="checkbox" data-select="${esc(i.processInstanceKey)}" aria-label="Select instance ${esc(i.processInstanceKey)}" ${selected.has(i.processInstanceKey) ? 'checked' : ''}></td>
        <td><a class="mono" href="/instances/${esc(i.processInstanceKey)}" aria-label="Open instance ${esc(i.processInstanceKey)}">${esc(i.processInstanceKey)}</a></td>
        <td>${esc(i.processDefinitionId)}</td><td class="num">${i.processDefinitionVersion ?? ''}</td>
        <td class="state state-${esc(i.state)}">${esc(stateLabel(i.state))}</td>
        <td>${i.hasIncident ? '<span class="incident-flag">incident</span>' : ''}</td>
        <td>${date(i.startDate)}</td><td>${date(i.endDate)}</td>
        <td>${i.state === 'ACTIVE' ? `<button type="button" class="danger" data-cancel="${esc(i.processInstanceKey)}" aria-label="Cancel instance ${esc(i.processInstanceKey)}">Cancel</button>` : ''}</td></tr>`);
      setHtml(list, `<table aria-label="Process instances"><thead><tr><th><input type="checkbox" data-select-all="1" aria-label="Select all on this page"></th><th>Instance</th><th>Process</th><th>Version</th><th>State</th>
        <th>Incident</th><th>Started</th><th>Ended</th><th></th></tr></thead><tbody>${rows.join('') || '<tr><td colspan="9" class="muted">No instances match.</td></tr>'}</tbody></table>
        <div class="pager"><button type="button" data-page="-1" aria-label="Previous page" ${f.page === 0 ? 'disabled' : ''}>Previous</button>
        <span id="page-info">Page ${f.page + 1} of ${pages}${more} · ${total}${more} instances</span>
        <button type="button" data-page="1" aria-label="Next page" ${f.page + 1 >= pages && !more ? 'disabled' : ''}>Next</button></div>`);
    });
  }

  // ---- One instance: diagram, incidents with Retry, variables with edit, elements, Cancel ----
  function instance() {
    const head = section(app, '');
    const canvas = section(app, '');
    canvas.className = 'diagram';
    canvas.setAttribute('aria-label', 'Process diagram');
    const incidentsBox = section(app, '');
    const columns = section(app, '');
    columns.className = 'columns';
    const variablesCol = section(columns, '<h2>Variables</h2>');
    const variablesBox = section(variablesCol, '');
    const addForm = section(variablesCol, `<form aria-label="Add variable" class="filters">
      <label>Name <input name="name" aria-label="New variable name" required></label>
      <label>Value (JSON) <input name="value" aria-label="New variable value" required></label>
      <button type="submit" aria-label="Add variable">Add</button></form>`).firstElementChild;
    const elementsCol = section(columns, '');
    const elementsBox = section(elementsCol, '');
    const modifyBox = section(elementsCol, '');
    const diagram = Diagram(canvas);
    let editing = null; // `${scope}/${name}` of the variable being edited
    let last = null;
    let refreshNow = null;
    let selectedScope = null; // the tree's selected element instance: only its variables shown
    const tree = window.WaggleInstance.create({
      treeBox: elementsBox, modifyBox, key, api, act, esc, stateLabel,
      viewer: () => diagram.viewer,
      refresh: () => refreshNow && refreshNow(),
      onSelect: (scope) => {
        selectedScope = scope;
        if (last && !editing) renderVariables();
      },
    });

    function scopeLabel(scopeKey) {
      if (scopeKey === key) return 'Process instance';
      const e = (last.elements || []).find((x) => x.elementInstanceKey === scopeKey);
      return e ? e.elementId : scopeKey;
    }

    function renderVariables() {
      const byScope = new Map();
      for (const v of last.variables) {
        if (!byScope.has(v.scopeKey)) byScope.set(v.scopeKey, []);
        byScope.get(v.scopeKey).push(v);
      }
      const scopes = [...byScope.keys()].sort((a, b) => (a === key ? -1 : b === key ? 1 : a.localeCompare(b)))
        .filter((s) => !selectedScope || s === selectedScope);
      if (!scopes.length) {
        variablesBox.innerHTML = `<p class="muted">No variables${selectedScope ? ` in ${esc(scopeLabel(selectedScope))}` : ''}.</p>`;
        return;
      }
      variablesBox.innerHTML = scopes.map((s) => {
        const label = scopeLabel(s);
        const suffix = s === key ? '' : ` in ${label}`;
        const rows = byScope.get(s).sort((a, b) => a.name.localeCompare(b.name)).map((v) => {
          const id = `${s}/${v.name}`;
          const value = editing === id
            ? `<input class="mono" name="edit" value="${esc(v.value)}" aria-label="New value of ${esc(v.name)}${esc(suffix)}">
               <button type="button" class="primary" data-save="${esc(id)}" aria-label="Save variable ${esc(v.name)}${esc(suffix)}">Save</button>
               <button type="button" data-discard="1" aria-label="Discard edit of ${esc(v.name)}${esc(suffix)}">Discard</button>`
            : `<code>${esc(v.value)}</code>`;
          const edit = editing === id ? '' : `<button type="button" data-edit="${esc(id)}" aria-label="Edit variable ${esc(v.name)}${esc(suffix)}">Edit</button>`;
          return `<tr data-variable="${esc(v.name)}"><td>${esc(v.name)}</td><td>${value}</td><td>${edit}</td></tr>`;
        });
        return `<table aria-label="Variables of ${esc(label)}"><caption class="muted" style="text-align:left">${esc(label)}</caption>
          <thead><tr><th>Name</th><th>Value</th><th></th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
      }).join('');
    }

    async function setVariable(scope, name, text) {
      let value;
      try {
        value = JSON.parse(text);
      } catch (_) {
        throw new Error(`the value of ${name} is not JSON (a string needs quotes)`);
      }
      await api('PUT', `/v2/element-instances/${scope}/variables`, { variables: { [name]: value }, local: true });
    }

    variablesBox.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.dataset.edit) {
        editing = b.dataset.edit;
        renderVariables();
        const input = variablesBox.querySelector('input[name="edit"]');
        if (input) input.focus();
      } else if (b.dataset.discard) {
        editing = null;
        renderVariables();
      } else if (b.dataset.save) {
        const [scope, ...rest] = b.dataset.save.split('/');
        const name = rest.join('/');
        const text = variablesBox.querySelector('input[name="edit"]').value;
        act(`Saved variable ${name}`, async () => {
          await setVariable(scope, name, text);
          editing = null;
        }, refreshNow);
      }
    });

    addForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const name = addForm.name.value.trim();
      const text = addForm.value.value;
      act(`Added variable ${name}`, async () => {
        await setVariable(key, name, text);
        addForm.reset();
      }, refreshNow);
    });

    app.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.dataset.retry) {
        b.disabled = true;
        act(`Retried incident ${b.dataset.retry}`, () => api('POST', `/ui/api/incidents/${b.dataset.retry}/retry`), refreshNow);
      } else if (b.dataset.cancelInstance) {
        b.disabled = true;
        act(`Canceled instance ${key}`, () => api('POST', `/v2/process-instances/${key}/cancellation`), refreshNow);
      }
    });

    refreshNow = poll(async () => {
      last = await api('GET', `/ui/api/instances/${key}`);
      const i = last.instance;
      app.querySelector('h1').textContent = `Instance ${key}`;
      const parent = i.parentProcessInstanceKey
        ? ` · called by <a href="/instances/${esc(i.parentProcessInstanceKey)}" aria-label="Open parent instance">${esc(i.parentProcessInstanceKey)}</a>` : '';
      head.innerHTML = `<div class="summary">
        <span>Process: <a href="/processes/${esc(i.processDefinitionKey)}">${esc(i.processDefinitionId)} version ${i.processDefinitionVersion ?? ''}</a></span>
        <span>State: <b id="instance-state" class="state state-${esc(i.state)}" aria-label="Instance state">${esc(stateLabel(i.state))}</b></span>
        <span>Started: ${date(i.startDate)}</span>${i.endDate ? `<span>Ended: ${date(i.endDate)}</span>` : ''}${parent}
        ${i.state === 'ACTIVE' ? '<button type="button" class="danger" data-cancel-instance="1" aria-label="Cancel instance">Cancel instance</button>' : ''}</div>`
        + (last.children.length ? `<div class="summary" aria-label="Called instances">Called: ${last.children.map((c) =>
          `<a href="/instances/${esc(c.processInstanceKey)}" aria-label="Open called instance ${esc(c.processInstanceKey)}">${esc(c.processDefinitionId)} ${esc(c.processInstanceKey)}</a> <span class="state state-${esc(c.state)}">${esc(stateLabel(c.state))}</span>`).join(' · ')}</div>` : '');

      const incidents = last.incidents;
      incidentsBox.innerHTML = `<h2>Incidents (${incidents.length})</h2>` + (incidents.length
        ? `<table aria-label="Incidents"><thead><tr><th>Element</th><th>Type</th><th>Message</th><th>Created</th><th></th></tr></thead><tbody>
          ${incidents.map((n) => `<tr data-incident="${esc(n.incidentKey)}"><td>${esc(n.elementId)}</td><td>${esc(n.errorType)}</td>
            <td class="error-message">${esc(n.errorMessage)}</td><td>${date(n.creationTime)}</td>
            <td><button type="button" class="primary" data-retry="${esc(n.incidentKey)}" aria-label="Retry incident ${esc(n.incidentKey)}">Retry</button></td></tr>`).join('')}
          </tbody></table>`
        : '<p class="muted">No active incidents.</p>');

      if (!editing) renderVariables();

      const elements = last.elements.filter((e) => e.type !== 'PROCESS');

      await diagram.load(i.processDefinitionKey);
      const marks = new Map();
      for (const e of elements) {
        if (e.state === 'ACTIVE') marks.set(e.elementId, e.hasIncident ? 'ui-incident' : 'ui-active');
        else if (!marks.has(e.elementId)) marks.set(e.elementId, 'ui-done');
      }
      for (const f of last.sequenceFlows || []) marks.set(f.elementId, 'ui-taken');
      diagram.mark(marks);
      tree.update(last);
    });
  }

  // ---- Incidents: every active incident, grouped by error type and process, with bulk retry ----
  function incidents() {
    const body = section(app, '<p class="muted">Loading…</p>');
    let groups = new Map();
    let refreshNow = null;
    body.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b || !b.dataset.group) return;
      const g = groups.get(b.dataset.group);
      if (!g) return;
      b.disabled = true;
      act(`Retried ${g.items.length} incident(s)`, async () => {
        for (const n of g.items) await api('POST', `/ui/api/incidents/${n.incidentKey}/retry`);
      }, refreshNow);
    });
    refreshNow = poll(async () => {
      const r = await api('POST', '/v2/incidents/search', { filter: { state: 'ACTIVE' }, sort: [{ field: 'creationTime' }], page: { limit: 10000 } });
      groups = new Map();
      for (const n of r.items) {
        const id = `${n.errorType}|${n.processDefinitionId}`;
        if (!groups.has(id)) groups.set(id, { errorType: n.errorType, process: n.processDefinitionId, items: [] });
        groups.get(id).items.push(n);
      }
      if (!groups.size) {
        setHtml(body, '<p>No active incidents.</p>');
        return;
      }
      const rows = [...groups].map(([id, g]) => {
        const instances = [...new Set(g.items.map((n) => n.processInstanceKey))];
        const links = instances.slice(0, 5).map((k) => `<a class="mono" href="/instances/${esc(k)}">${esc(k)}</a>`).join(' ');
        return `<tr data-group="${esc(id)}"><td>${esc(g.errorType)}</td><td>${esc(g.process)}</td><td class="num">${g.items.length}</td>
          <td class="error-message">${esc(g.items[0].errorMessage)}</td><td>${links}${instances.length > 5 ? ' …' : ''}</td>
          <td><button type="button" class="primary" data-group="${esc(id)}" aria-label="Retry all ${esc(g.errorType)} incidents of ${esc(g.process)}">Retry all</button></td></tr>`;
      });
      setHtml(body, `<table aria-label="Incidents by error type and process"><thead><tr><th>Error type</th><th>Process</th><th>Incidents</th>
        <th>First message</th><th>Instances</th><th></th></tr></thead><tbody>${rows.join('')}</tbody></table>`);
    });
  }

  ({ processes, process, instances, instance, incidents }[view] || (() => {}))();
})();
