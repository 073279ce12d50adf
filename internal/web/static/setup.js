// The first-run setup view (docs/web.md#setup): shown instead of the chat
// while the model provider in use has no key. Pick a provider, paste its key,
// test it live, save it; optionally the same for a chat channel's bot
// token. Keys go to the server and never come back: the view learns only
// what is missing. It imports only api.js; app.js loads it on demand.
import { api } from './api.js';

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  e.append(...kids);
  return e;
}

function stylesheet() {
  if (document.querySelector('link[href="/assets/setup.css"]')) return;
  document.head.append(el('link', { rel: 'stylesheet', href: '/assets/setup.css' }));
}

// result shows a test's or a save's outcome under its buttons.
function result(node, ok, text) {
  node.textContent = text;
  node.className = ok ? 'setup-ok' : 'error';
}

// showSetup shows the view over the chat and resolves once a model key is
// saved (or the person chooses to go on without one).
export async function showSetup() {
  stylesheet();
  const state = await api('GET', '/api/setup');
  const chat = $('chat'), panel = $('panel');
  chat.hidden = true;
  panel.hidden = true;

  const providers = state.providers || [];
  const select = el('select', { id: 'setup-provider', 'aria-label': 'provider' });
  for (const p of providers) {
    const label = p.name + (p.in_use ? ' (used by agents.model)' : '');
    select.append(el('option', { value: p.name, text: label }));
  }
  const inUse = providers.find((p) => p.in_use && p.problem) || providers.find((p) => p.in_use);
  if (inUse) select.value = inUse.name;
  const hint = el('p', { class: 'setup-hint', id: 'setup-hint' });
  const showHint = () => {
    const p = providers.find((x) => x.name === select.value) || {};
    hint.textContent = (p.problem ? p.problem + '. ' : '') +
      (p.key_var ? `It is saved in the data dir and used instead of ${p.key_var}.` : '');
  };
  select.addEventListener('change', showHint);
  showHint();

  const key = el('input', { id: 'setup-key', type: 'password', autocomplete: 'off', placeholder: 'API key', 'aria-label': 'API key' });
  const test = el('button', { id: 'setup-test', type: 'button', text: 'Test' });
  const save = el('button', { id: 'setup-save', type: 'submit', text: 'Save and start chatting' });
  const out = el('p', { id: 'setup-result', role: 'status' });

  // One option per chat channel the daemon has (its channel table).
  const channel = el('select', { id: 'setup-channel', 'aria-label': 'channel' },
    ...(state.channels || []).map((c) => el('option', { value: c.name, text: c.name.charAt(0).toUpperCase() + c.name.slice(1) })));
  const token = el('input', { id: 'setup-token', type: 'password', autocomplete: 'off', placeholder: 'bot token (optional)', 'aria-label': 'bot token' });
  const tokenTest = el('button', { id: 'setup-token-test', type: 'button', text: 'Test' });
  const tokenSave = el('button', { id: 'setup-token-save', type: 'button', text: 'Save' });
  const tokenOut = el('p', { id: 'setup-token-result', role: 'status' });
  const channelNotes = (state.channels || []).filter((c) => c.problem).map((c) => el('p', { class: 'setup-hint', text: `${c.name}: ${c.problem}` }));

  const later = el('button', { id: 'setup-later', type: 'button', class: 'link', text: 'Go on without a key' });
  const form = el('form', { id: 'setup', class: 'card setup' },
    el('h1', { text: 'Set up nanobot' }),
    el('p', { text: 'The model needs an API key. Paste one here: it is tested, kept on this machine (mode 0600, outside the workspace) and used at once — no restart.' }),
    el('label', { text: 'Provider ' }, select), hint, key,
    el('div', { class: 'setup-row' }, test, save), out,
    el('details', {}, el('summary', { text: 'Chat channels (optional)' }),
      ...channelNotes,
      el('p', { class: 'setup-hint', text: 'A bot token is tested, saved, and used at once by an enabled channel (a disabled one takes it at the next start).' }),
      el('label', { text: 'Channel ' }, channel), token,
      el('div', { class: 'setup-row' }, tokenTest, tokenSave), tokenOut),
    later);
  chat.before(form);

  const keyInput = () => ({ provider: select.value, key: key.value.trim() });
  const tokenInput = () => ({ channel: channel.value, token: token.value.trim() });
  const run = async (btn, node, fn) => {
    btn.disabled = true;
    result(node, true, 'Checking…');
    try { await fn(); } catch (e) { result(node, false, e.message); } finally { btn.disabled = false; }
  };
  test.addEventListener('click', () => run(test, out, async () => {
    const r = await api('POST', '/api/setup/test', keyInput());
    result(out, r.ok, r.ok ? r.detail : r.error);
  }));
  tokenTest.addEventListener('click', () => run(tokenTest, tokenOut, async () => {
    const r = await api('POST', '/api/setup/test', tokenInput());
    result(tokenOut, r.ok, r.ok ? r.detail : r.error);
  }));
  tokenSave.addEventListener('click', () => run(tokenSave, tokenOut, async () => {
    const r = await api('POST', '/api/setup/save', tokenInput());
    token.value = '';
    const now = r && (r.restart || []).length === 0;
    result(tokenOut, true, now ? `Saved. ${channel.value} is starting with it now — no restart.`
      : `Saved. ${channel.value} starts with it at the next start of the gateway (enable it in the config first if it is off).`);
  }));

  await new Promise((resolve) => {
    const done = () => { form.remove(); chat.hidden = false; resolve(); };
    later.addEventListener('click', done);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      run(save, out, async () => {
        await api('POST', '/api/setup/save', keyInput());
        key.value = '';
        done();
      });
    });
  });
}
