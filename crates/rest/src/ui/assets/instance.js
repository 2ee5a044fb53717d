// The instance page's element instance tree and its modification controls (issue 28), used by
// app.js's instance view. The tree nests the instance's element instances by flow scope
// (subprocesses, multi-instance bodies and their inner instances, event subprocesses), with
// state and incident markers and links to the instances a call activity called; selecting a
// node highlights its element on the diagram and shows that scope's variables. The controls
// send ModifyProcessInstance (`POST /v2/process-instances/{key}/modification`): move a token
// (terminate an element instance, activate an element), add one (optionally with variables),
// cancel one; the engine's rejection is shown as the command's failure.
'use strict';
window.WaggleInstance = (function () {
  /** Decimal keys in numeric order. */
  const byKey = (a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

  /**
   * o: {treeBox, modifyBox, key, api, act, esc, stateLabel, viewer: () => bpmn-js viewer,
   *     refresh: () => void, onSelect: (scopeKey or null) => void}
   */
  function create(o) {
    const esc = o.esc;
    let last = null;
    let selected = null; // the selected element instance's key
    let treeText = '';
    let tokensText = '';
    let targetsFilled = false;

    o.modifyBox.innerHTML = `<h2>Modify</h2><form class="filters" aria-label="Modify instance">
      <label>Token <select name="token" aria-label="Token"></select></label>
      <label>Target element <select name="target" aria-label="Target element"></select></label>
      <label>Variables of the new token (JSON object) <input name="variables" class="mono" aria-label="Variables of the new token" placeholder="{}"></label>
      <button type="button" class="primary" data-modify="move" aria-label="Move token">Move token</button>
      <button type="button" data-modify="add" aria-label="Add token">Add token</button>
      <button type="button" class="danger" data-modify="cancel" aria-label="Cancel token">Cancel token</button></form>`;
    const form = o.modifyBox.querySelector('form');

    const element = (id) => {
      const v = o.viewer();
      return v ? v.get('elementRegistry').get(id) : null;
    };
    const nameOf = (id) => {
      const el = element(id);
      return (el && el.businessObject && el.businessObject.name) || id;
    };
    const elements = () => (last ? last.elements : []);
    const scopeOf = (k) => (last && last.scopes && last.scopes[k]) || null;
    const byInstance = (k) => elements().find((e) => e.elementInstanceKey === k);
    const tokenLabel = (e) => `${e.elementId}${e.type === 'MULTI_INSTANCE_BODY' ? ' (multi-instance)' : ''} ${e.elementInstanceKey}`;

    function highlight() {
      const v = o.viewer();
      if (!v) return;
      const canvas = v.get('canvas');
      for (const el of v.get('elementRegistry').filter((x) => canvas.hasMarker(x, 'ui-selected'))) canvas.removeMarker(el, 'ui-selected');
      const e = selected && byInstance(selected);
      if (e && e.type !== 'PROCESS' && element(e.elementId)) canvas.addMarker(e.elementId, 'ui-selected');
    }

    function select(k) {
      selected = selected === k ? null : k;
      const e = selected && byInstance(selected);
      if (e && e.state === 'ACTIVE' && e.type !== 'PROCESS' && [...form.token.options].some((x) => x.value === k)) form.token.value = k;
      renderTree(true);
      highlight();
      o.onSelect(selected);
    }

    function node(e, children, calls) {
      const k = e.elementInstanceKey;
      const kids = children.get(k) || [];
      const body = e.type === 'MULTI_INSTANCE_BODY';
      const label = e.type === 'PROCESS' ? `${e.elementId} (process instance)` : nameOf(e.elementId);
      const called = (calls.get(k) || []).map((c) =>
        ` <a href="/instances/${esc(c.processInstanceKey)}" aria-label="Open called instance ${esc(c.processInstanceKey)}">called ${esc(c.processDefinitionId)} ${esc(c.processInstanceKey)}</a>`).join('');
      return `<li data-node="${esc(k)}" data-element="${esc(e.elementId)}" data-type="${esc(e.type)}" data-state="${esc(e.state)}">
        <button type="button" class="node${selected === k ? ' selected' : ''}" data-select="${esc(k)}" aria-pressed="${selected === k}"
          aria-label="Select ${esc(tokenLabel(e))}">${esc(label)}${body ? ' <span class="muted">(multi-instance)</span>' : ''}</button>
        <span class="state state-${esc(e.state)}">${esc(o.stateLabel(e.state))}</span>${e.hasIncident ? ' <span class="incident-flag">incident</span>' : ''}${called}
        ${kids.length ? `<ul>${kids.map((c) => node(c, children, calls)).join('')}</ul>` : ''}</li>`;
    }

    function renderTree(force) {
      const children = new Map();
      let root = null;
      for (const e of elements()) {
        if (e.elementInstanceKey === o.key) {
          root = e;
          continue;
        }
        const parent = scopeOf(e.elementInstanceKey) || o.key;
        if (!children.has(parent)) children.set(parent, []);
        children.get(parent).push(e);
      }
      for (const list of children.values()) list.sort((a, b) => byKey(a.elementInstanceKey, b.elementInstanceKey));
      const calls = new Map();
      for (const c of last.children || []) {
        if (!c.parentElementInstanceKey) continue;
        if (!calls.has(c.parentElementInstanceKey)) calls.set(c.parentElementInstanceKey, []);
        calls.get(c.parentElementInstanceKey).push(c);
      }
      const html = root
        ? `<ul class="tree" aria-label="Element instance tree">${node(root, children, calls)}</ul>`
        : '<p class="muted">No element instances yet.</p>';
      if (!force && html === treeText) return;
      treeText = html;
      o.treeBox.innerHTML = '<h2>Element instances</h2>' + html;
    }

    function renderTokens() {
      const active = elements().filter((e) => e.state === 'ACTIVE' && e.type !== 'PROCESS');
      const text = JSON.stringify(active.map((e) => [e.elementInstanceKey, e.elementId, e.type]));
      if (text === tokensText) return;
      tokensText = text;
      const keep = form.token.value;
      form.token.innerHTML = active.length
        ? active.map((e) => `<option value="${esc(e.elementInstanceKey)}">${esc(tokenLabel(e))}</option>`).join('')
        : '<option value="">No active token</option>';
      if (active.some((e) => e.elementInstanceKey === keep)) form.token.value = keep;
    }

    function fillTargets() {
      const v = o.viewer();
      if (targetsFilled || !v) return;
      const nodes = v.get('elementRegistry')
        .filter((el) => el.type !== 'label' && el.businessObject && el.businessObject.$instanceOf && el.businessObject.$instanceOf('bpmn:FlowNode'))
        .map((el) => el.businessObject)
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      if (!nodes.length) return;
      form.target.innerHTML = nodes.map((b) => `<option value="${esc(b.id)}">${esc(b.name ? `${b.name} (${b.id})` : b.id)}</option>`).join('');
      targetsFilled = true;
    }

    /**
     * The ancestor for activating `target`: none when its flow scope is the process; else the
     * instance of its flow scope element above `near` (the moved token or the selected node),
     * or the only active one; none otherwise (the engine then decides, or refuses).
     */
    function ancestorFor(target, near) {
      const el = element(target);
      const parent = el && el.businessObject.$parent;
      if (!parent || parent.$instanceOf('bpmn:Process')) return null;
      for (let k = near; k; k = scopeOf(k)) {
        const e = byInstance(k);
        if (e && e.elementId === parent.id && e.type !== 'MULTI_INSTANCE_BODY' && e.state === 'ACTIVE') return k;
      }
      const candidates = elements().filter((e) => e.elementId === parent.id && e.type !== 'MULTI_INSTANCE_BODY' && e.state === 'ACTIVE');
      return candidates.length === 1 ? candidates[0].elementInstanceKey : null;
    }

    function variables() {
      const text = form.variables.value.trim();
      if (!text) return null;
      let v;
      try {
        v = JSON.parse(text);
      } catch (_) {
        throw new Error('the variables are not JSON');
      }
      if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('the variables must be a JSON object');
      return v;
    }

    form.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-modify]');
      if (!b) return;
      const kind = b.dataset.modify;
      const token = form.token.value;
      const target = form.target.value;
      const e = byInstance(token);
      const label = {
        move: `Moved token ${e ? tokenLabel(e) : token} to ${target}`,
        add: `Added a token at ${target}`,
        cancel: `Canceled token ${e ? tokenLabel(e) : token}`,
      }[kind];
      o.act(label, async () => {
        const body = { activateInstructions: [], terminateInstructions: [] };
        if (kind !== 'add') {
          if (!token) throw new Error('no active token is chosen');
          body.terminateInstructions.push({ elementInstanceKey: token });
        }
        if (kind !== 'cancel') {
          if (!target) throw new Error('no target element is chosen');
          const activate = { elementId: target };
          const ancestor = ancestorFor(target, kind === 'move' ? scopeOf(token) : selected);
          if (ancestor) activate.ancestorElementInstanceKey = ancestor;
          const v = variables();
          if (v) activate.variableInstructions = [{ variables: v }];
          body.activateInstructions.push(activate);
        }
        await o.api('POST', `/v2/process-instances/${o.key}/modification`, body);
        form.variables.value = '';
      }, o.refresh);
    });

    o.treeBox.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-select]');
      if (b) select(b.dataset.select);
    });

    return {
      /** Redraws from the instance's answer (`/ui/api/instances/{key}`), after the diagram loaded. */
      update(answer) {
        last = answer;
        if (selected && !byInstance(selected)) {
          selected = null;
          o.onSelect(null);
        }
        fillTargets();
        renderTree(false);
        renderTokens();
        o.modifyBox.hidden = answer.instance.state !== 'ACTIVE';
        highlight();
      },
    };
  }

  return { create };
})();
