// The page's one way to call the server, shared by the chat (app.js) and the
// control panel (panel.js): JSON or a FormData in, JSON out, the CSRF token on
// every write. It imports neither of them, so imports run one way: app.js and
// panel.js depend on this module, and app.js loads panel.js on demand. What a
// 401 means for the page (show the login) is app.js's business; it tells
// this module through onUnauthorized.
let csrf = '';
let unauthorized = () => {};

// setCSRF stores the token the login (or the session check) returned.
export function setCSRF(token) { csrf = token; }

// onUnauthorized sets what to do when the server answers 401 to anything but
// the login itself: the session is gone.
export function onUnauthorized(fn) { unauthorized = fn; }

export async function api(method, url, body, headers) {
  const opts = { method, headers: { ...headers }, credentials: 'same-origin' };
  if (method !== 'GET') opts.headers['X-CSRF-Token'] = csrf;
  if (body instanceof FormData) opts.body = body;
  else if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
  const r = await fetch(url, opts);
  let data = null;
  if (r.status !== 204) { try { data = await r.json(); } catch { data = null; } }
  if (r.status === 401 && url !== '/api/login') { unauthorized(); }
  if (!r.ok) throw new Error((data && data.error) || `${r.status} ${r.statusText}`);
  return data;
}
