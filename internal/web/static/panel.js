// The control panel: status, sessions of every channel (read-only, with the
// level of detail each observation would be sent at), MEMORY.md and the
// bootstrap files (edited with an ETag precondition), cron jobs, pairing.
import { api } from './api.js';

let root;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function table(head, rows) {
  const t = el('table');
  const tr = el('tr');
  for (const h of head) tr.append(el('th', '', h));
  const thead = el('thead');
  thead.append(tr);
  t.append(thead);
  const body = el('tbody');
  for (const r of rows) {
    const row = el('tr');
    for (const c of r) {
      const td = el('td');
      if (c instanceof Node) td.append(c); else td.textContent = c ?? '';
      row.append(td);
    }
    body.append(row);
  }
  t.append(body);
  return t;
}

function button(text, cls, onclick) {
  const b = el('button', cls, text);
  b.type = 'button';
  b.addEventListener('click', onclick);
  return b;
}

function when(t) {
  if (!t || t.startsWith('0001')) return '';
  return new Date(t).toLocaleString();
}

const tabs = { Status: status, Sessions: sessions, Memory: () => editor('MEMORY.md'), Files: files, Cron: cron, Pairing: pairing };

export function showPanel(r, back) {
  root = r;
  root.replaceChildren();
  const nav = el('nav');
  const body = el('div');
  body.id = 'panel-body';
  const msg = el('p', 'error');
  msg.id = 'panel-error';
  for (const [name, fn] of Object.entries(tabs)) {
    const b = button(name, '', async () => {
      for (const x of nav.children) x.classList.toggle('active', x === b);
      msg.textContent = '';
      body.replaceChildren(el('p', '', 'Loading…'));
      try { await fn(body); } catch (e) { msg.textContent = e.message; }
    });
    b.id = 'tab-' + name.toLowerCase();
    nav.append(b);
  }
  nav.append(button('← Back to chat', 'link', back));
  root.append(el('h2', '', 'Control panel'), nav, msg, body);
  nav.firstChild.click();
}

async function status(body) {
  const s = await api('GET', '/api/panel/status');
  const routes = Object.entries(s.routes || {}).map(([k, v]) => [k, v]);
  body.replaceChildren(
    el('p', '', `nanobot ${s.version} — up ${s.uptime} (since ${when(s.started)})`),
    el('h3', '', 'Model'),
    table(['Default', 'Fallbacks'], [[s.model, (s.fallbacks || []).join(', ') || '—']]),
    routes.length ? table(['Route', 'Model'], routes) : el('p', '', 'No named routes.'),
    el('h3', '', 'Channels'),
    table(['Channel', 'State', 'Problem'], s.channels.map((c) => [c.name, el('span', c.up ? 'up' : 'down', c.up ? 'up' : 'down'), c.error || ''])),
    el('h3', '', 'MCP servers'),
    s.mcp.length ? table(['Server', 'Transport', 'State', 'Tools', 'Problem'], s.mcp.map((m) => [m.name, m.transport, m.state, m.tools, m.error || '']))
      : el('p', '', 'No MCP servers configured.'),
    el('h3', '', 'Tokens'),
    s.usage.length ? table(['Model', 'Today in', 'Today out', 'Since start in', 'Since start out'],
      s.usage.map((u) => [u.model, u.today_input, u.today_output, u.total_input, u.total_output]))
      : el('p', '', 'No model calls since the gateway started.'),
  );
}

async function sessions(body) {
  const form = el('form');
  const q = el('input');
  q.type = 'search';
  q.placeholder = 'Search every session…';
  q.id = 'session-search';
  form.append(q, el('button', '', 'Search'));
  const out = el('div');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await api('GET', '/api/panel/sessions?q=' + encodeURIComponent(q.value));
    if (!r.hits) return;
    out.replaceChildren(table(['Session', '#', 'Role', 'Text'], r.hits.map((h) =>
      [button(h.key, 'link', () => session(out, h.key)), h.index, h.role, h.snippet])));
    if (r.truncated) out.append(el('p', '', 'More matches not shown; search for something narrower.'));
  });
  const { sessions: list } = await api('GET', '/api/panel/sessions');
  out.replaceChildren(table(['Session', 'Size', 'Last change'], list.map((s) =>
    [button(s.key, 'link', () => session(out, s.key)), s.size_text, when(s.modified)])));
  body.replaceChildren(form, out);
}

async function session(out, key) {
  const s = await api('GET', '/api/panel/sessions/' + encodeURIComponent(key));
  out.replaceChildren(el('h3', '', key), el('p', '', `${s.messages.length} messages, ${s.consolidated} folded into memory. ` +
    'Observations are tagged with the detail the next model call would send: live (full), summary, gist (one line) or not sent.'));
  for (const m of s.messages) {
    const d = el('div', 'entry');
    const head = el('div', 'tools', `#${m.index} ${m.role} ${m.time || ''} ${m.model || ''} ${m.usage ? '(' + m.usage + ')' : ''}`);
    if (m.level) head.append(' ', el('span', 'lod', m.level));
    d.append(head, el('div', '', m.text));
    out.append(d);
  }
}

async function editor(name, body) {
  body = body || document.getElementById('panel-body');
  const f = await api('GET', '/api/panel/files/' + encodeURIComponent(name));
  let etag = f.etag;
  const ta = el('textarea');
  ta.id = 'file-editor';
  ta.value = f.content;
  ta.spellcheck = false;
  const msg = el('p', 'status');
  msg.id = 'file-msg';
  const save = button('Save', '', async () => {
    save.disabled = true;
    try {
      const data = await api('PUT', '/api/panel/files/' + encodeURIComponent(name), { content: ta.value }, { 'If-Match': etag });
      etag = data.etag;
      msg.classList.remove('error');
      msg.textContent = `Saved ${name} at ${new Date().toLocaleTimeString()}.`;
    } catch (e) {
      msg.textContent = e.message;
      msg.classList.add('error');
    } finally { save.disabled = false; }
  });
  save.id = 'file-save';
  const reload = button('Reload', 'link', () => editor(name, body));
  // The heading is the file's place in the workspace, once (for the
  // bootstrap files that is their name).
  body.replaceChildren(el('h3', '', f.path), ta, save, reload, msg);
}

async function files(body) {
  const { files: list } = await api('GET', '/api/panel/files');
  const out = el('div');
  // One column names the file by its place in the workspace: a second
  // column repeated it for every bootstrap file.
  body.replaceChildren(table(['File', 'Size'], list.filter((f) => f.name !== 'MEMORY.md').map((f) =>
    [button(f.path, 'link', () => editor(f.name, out)), f.exists ? f.size_text : 'missing'])), out);
}

async function cron(body) {
  const { jobs } = await api('GET', '/api/panel/cron');
  if (!jobs.length) { body.replaceChildren(el('p', '', 'No scheduled jobs.')); return; }
  body.replaceChildren(table(['Job', 'Chat', 'When', 'Next run', 'Runs', 'Instruction', ''], jobs.map((j) => {
    const rm = button('Remove', 'danger remove', async () => {
      if (!confirm(`Remove job ${j.id}?`)) return;
      await api('DELETE', '/api/panel/cron/' + encodeURIComponent(j.id));
      await cron(body);
    });
    rm.dataset.id = j.id;
    return [j.id, j.session, j.schedule, when(j.next_run), j.runs, j.message, rm];
  })));
}

async function pairing(body) {
  const st = await api('GET', '/api/panel/pairing');
  const pending = (st.pending || []).map((p) => {
    const ok = button('Approve', 'approve', async () => { await api('POST', `/api/panel/pairing/${encodeURIComponent(p.code)}/approve`); await pairing(body); });
    const no = button('Deny', 'danger deny', async () => { await api('POST', `/api/panel/pairing/${encodeURIComponent(p.code)}/deny`); await pairing(body); });
    ok.dataset.code = no.dataset.code = p.code;
    const both = el('span');
    both.append(ok, ' ', no);
    return [p.code, p.channel, p.sender_id, p.sender_name || '', when(p.created), both];
  });
  const approved = (st.approved || []).map((a) => {
    const rv = button('Revoke', 'danger revoke', async () => {
      if (!confirm(`Revoke ${a.channel} user ${a.sender_id}?`)) return;
      await api('POST', '/api/panel/pairing/revoke', { channel: a.channel, sender_id: a.sender_id });
      await pairing(body);
    });
    rv.dataset.sender = a.sender_id;
    return [a.channel, a.sender_id, a.sender_name || '', when(a.approved_at), rv];
  });
  body.replaceChildren(
    el('h3', '', 'Waiting for approval'),
    pending.length ? table(['Code', 'Channel', 'Sender', 'Name', 'Asked', ''], pending) : el('p', '', 'No pending codes.'),
    el('h3', '', 'Approved'),
    approved.length ? table(['Channel', 'Sender', 'Name', 'Since', ''], approved) : el('p', '', 'Nobody approved through pairing.'),
  );
}
