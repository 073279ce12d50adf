// The chat page: login, conversations, the event stream of the open one,
// sending (with uploads), Stop. Model output arrives as HTML rendered by the
// server from Markdown (raw HTML dropped); it is checked again here against
// an allowlist before it is shown, and the page's CSP forbids inline script.
import { api, onUnauthorized, setCSRF } from './api.js';
import { clean } from './sanitize.js';

const $ = (id) => document.getElementById(id);
let current = null;   // the open conversation's id
let stream = null;    // its EventSource
let shown = 0;        // messages of the session the transcript holds (hello's n)
let busy = false;
const pending = new Map(); // id -> {text, files, at}: sent, not yet seen stored

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function showLogin(msg) {
  if (stream) { stream.close(); stream = null; }
  $('app').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = msg || '';
  $('login-token').focus();
}

async function showApp(session) {
  setCSRF(session.csrf);
  $('login').hidden = true;
  $('app').hidden = false;
  $('open-panel').hidden = !session.panel;
  // No usable model key: the setup view first (setup.js, loaded on demand).
  if (session.setup) await (await import('./setup.js')).showSetup();
  await loadChats();
}

async function boot() {
  const m = location.hash.match(/^#login=([\w-]+)$/);
  if (m) {
    history.replaceState(null, '', location.pathname);
    try { await showApp(await api('POST', '/api/login', { link: m[1] })); return; }
    catch (e) { showLogin('That login link is used or expired (links work once, for 10 minutes): ' + e.message); return; }
  }
  try { await showApp(await api('GET', '/api/session')); }
  catch { showLogin(); }
}

$('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  try {
    const s = await api('POST', '/api/login', { token: $('login-token').value.trim() });
    $('login-token').value = '';
    await showApp(s);
  } catch (e) { $('login-error').textContent = e.message; }
});

$('logout').addEventListener('click', async () => {
  try { await api('POST', '/api/logout'); } finally { showLogin(); }
});

// ---- conversations

async function loadChats(select) {
  let { chats } = await api('GET', '/api/chats');
  if (!chats || chats.length === 0) {
    chats = [await api('POST', '/api/chats', {})];
  }
  const ul = $('chats');
  ul.replaceChildren();
  for (const c of chats) {
    const li = el('li', c.id === (select || current) ? 'active' : '', c.title);
    li.dataset.id = c.id;
    li.title = c.title;
    li.addEventListener('click', () => open(c.id));
    ul.append(li);
  }
  const want = select || (chats.some((c) => c.id === current) ? current : chats[0].id);
  if (want !== current || !stream) open(want);
  else markActive();
}

function markActive() {
  for (const li of $('chats').children) {
    li.classList.toggle('active', li.dataset.id === current);
    if (li.dataset.id === current) $('chat-title').textContent = li.textContent;
  }
}

function open(id) {
  if (stream) stream.close();
  current = id;
  pending.clear();
  $('panel').hidden = true;
  $('chat').hidden = false;
  $('transcript').replaceChildren();
  delete $('transcript').dataset.ready;
  setBusy(false);
  setStatus('');
  markActive();
  stream = new EventSource(`/api/chats/${id}/events`);
  stream.onmessage = (e) => handle(JSON.parse(e.data));
  const es = stream;
  es.onerror = () => {
    // EventSource retries network errors by itself; an HTTP error (the
    // conversation deleted in another tab, the gateway restarting, the
    // login gone) closes it for good: find out why and start again.
    if (es === stream && es.readyState === EventSource.CLOSED) {
      stream = null;
      setTimeout(recover, 1000);
    }
  };
  $('input').focus();
}

// recover reopens the stream after it closed: the list decides which
// conversation (the current one, if it still exists); a 401 shows the login.
async function recover() {
  if (stream || $('app').hidden || !$('panel').hidden) return;
  try {
    await api('GET', '/api/session');
    await loadChats();
  } catch {
    if (!$('app').hidden) setTimeout(recover, 3000);
  }
}

$('new-chat').addEventListener('click', async () => {
  const c = await api('POST', '/api/chats', {});
  await loadChats(c.id);
});

$('rename-chat').addEventListener('click', async () => {
  const t = prompt('New title', $('chat-title').textContent);
  if (!t) return;
  await api('PATCH', `/api/chats/${current}`, { title: t });
  await loadChats(current);
});

$('delete-chat').addEventListener('click', async () => {
  if (!confirm('Delete this conversation? What matters in it is saved to memory first, and the file is archived.')) return;
  await api('DELETE', `/api/chats/${current}`);
  current = null;
  await loadChats();
});

// ---- the transcript

function bubble(role, cls) {
  const d = el('div', `msg ${role}${cls ? ' ' + cls : ''}`);
  $('transcript').append(d);
  return d;
}

function setHTML(d, html) {
  d.replaceChildren(clean(html));
  for (const pre of d.querySelectorAll('pre')) {
    const b = el('button', 'copy', 'Copy');
    b.type = 'button';
    b.addEventListener('click', async () => {
      try { await navigator.clipboard.writeText(pre.querySelector('code')?.textContent ?? pre.textContent); b.textContent = 'Copied'; }
      catch { b.textContent = 'Copy failed'; }
    });
    pre.append(b);
  }
}

// addFiles lists the files an answer carried (the message tool's): pictures
// as previews, other files as downloads, both served behind the login; a
// file the page cannot fetch (outside the workspace) is named.
function addFiles(d, files) {
  if (!files || !files.length) return;
  const box = el('div', 'sent');
  for (const f of files) {
    if (f.url && f.image) {
      const a = el('a', 'file');
      a.href = f.url;
      a.target = '_blank';
      a.rel = 'noopener';
      const img = el('img', 'preview');
      img.src = f.url;
      img.alt = f.name;
      a.append(img);
      box.append(a);
    } else if (f.url) {
      const a = el('a', 'file', '📎 ' + f.name);
      a.href = f.url;
      a.download = f.name;
      box.append(a);
    } else {
      box.append(el('span', 'file missing', '📎 ' + f.name + ' (not available on this page)'));
    }
  }
  d.append(box);
}

function userBubble(text, files, cls) {
  const d = bubble('user', cls);
  d.textContent = text;
  if (files && files.length) d.append(el('div', 'files', 'Attached: ' + files.join(', ')));
  return d;
}

function scroll() {
  const t = $('transcript');
  t.scrollTop = t.scrollHeight;
}

function draftFor(turn) {
  let d = $('transcript').querySelector(`.msg.draft[data-turn="${CSS.escape(turn || '')}"]`);
  if (!d) { d = bubble('assistant', 'draft pending'); d.dataset.turn = turn || ''; }
  return d;
}

function setBusy(b) {
  busy = b;
  $('stop').disabled = !b;
}

function setStatus(text) {
  $('status-line').hidden = !text;
  $('status-line').textContent = text || '';
}

function handle(ev) {
  switch (ev.type) {
    case 'hello': {
      const t = $('transcript');
      t.replaceChildren();
      const seen = new Set();
      for (const m of ev.messages) {
        if (m.role === 'user') {
          (m.ids || []).forEach((id) => seen.add(id));
          userBubble(m.text, m.files);
        } else {
          const d = bubble('assistant');
          if (m.html) setHTML(d, m.html);
          addFiles(d, m.sent);
          if (m.tools && m.tools.length) d.append(el('div', 'tools', 'Used: ' + m.tools.join(', ')));
        }
      }
      shown = ev.n;
      const old = Date.now() - 10 * 60 * 1000;
      for (const [id, p] of pending) {
        if (seen.has(id) || p.at < old) pending.delete(id);
        else userBubble(p.text, p.files, 'pending');
      }
      setBusy(!!ev.turn);
      setStatus(ev.status || '');
      t.dataset.ready = '1'; // the stream is live (tests wait for it)
      if (ev.turn && ev.draft) setHTML(draftFor(ev.turn), ev.draft);
      break;
    }
    case 'start':
      setBusy(true);
      break;
    case 'draft':
      setBusy(true);
      setHTML(draftFor(ev.turn), ev.html);
      break;
    case 'status':
      setStatus(ev.text);
      break;
    case 'final': {
      setBusy(false);
      setStatus('');
      const d = draftFor(ev.turn);
      if (!ev.error && ev.n && ev.n <= shown) { d.remove(); break; } // the hello had it
      if (ev.n) shown = ev.n;
      d.classList.remove('draft', 'pending');
      delete d.dataset.turn;
      if (ev.html) setHTML(d, ev.html);
      addFiles(d, ev.files);
      if (ev.error) d.classList.add('error');
      if (!d.childNodes.length) d.remove();
      for (const u of $('transcript').querySelectorAll('.msg.user.pending')) u.classList.remove('pending');
      break;
    }
    case 'message': {
      const d = bubble('assistant');
      if (ev.html) setHTML(d, ev.html);
      addFiles(d, ev.files);
      break;
    }
  }
  scroll();
}

// ---- sending

function newID() {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function showAttachments() {
  const names = Array.from($('file').files, (f) => f.name);
  $('attachments').textContent = names.length ? 'Attached: ' + names.join(', ') : '';
}
$('file').addEventListener('change', showAttachments);

$('input').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});

$('composer').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const text = $('input').value;
  const files = Array.from($('file').files);
  if (!text.trim() && files.length === 0) return;
  const id = newID();
  const names = files.map((f) => f.name);
  const b = userBubble(text, names, 'pending');
  pending.set(id, { text, files: names, at: Date.now() });
  scroll();
  $('input').value = '';
  $('chat-error').textContent = '';
  const fd = new FormData();
  fd.append('id', id);
  fd.append('text', text);
  for (const f of files) fd.append('file', f, f.name);
  $('file').value = '';
  showAttachments();
  try {
    await api('POST', `/api/chats/${current}/messages`, fd);
    if (!text.startsWith('/')) loadChats(current); // the first message names the chat
  } catch (e) {
    pending.delete(id);
    b.classList.add('error');
    $('chat-error').textContent = e.message;
  }
});

$('stop').addEventListener('click', async () => {
  try { await api('POST', `/api/chats/${current}/stop`); }
  catch (e) { $('chat-error').textContent = e.message; }
});

$('open-panel').addEventListener('click', async () => {
  const { showPanel } = await import('./panel.js');
  if (stream) { stream.close(); stream = null; }
  $('chat').hidden = true;
  $('panel').hidden = false;
  showPanel($('panel'), () => { $('panel').hidden = true; $('chat').hidden = false; open(current); });
});

onUnauthorized(() => showLogin());
boot();
