// clean turns HTML rendered by the server into a fragment that holds only
// the elements and attributes Markdown needs. The server's renderer already
// drops raw HTML and dangerous links; this is the second line of defence,
// and the CSP (no inline script, no inline style) is the third.
const TAGS = new Set(['P', 'BR', 'HR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'STRONG', 'EM', 'DEL', 'S', 'CODE', 'PRE',
  'BLOCKQUOTE', 'UL', 'OL', 'LI', 'A', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'INPUT', 'SPAN']);
const SAFE_URL = /^(https?:|mailto:)/i;

export function clean(html) {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, 'text/html');
  const out = document.createDocumentFragment();
  for (const n of Array.from(doc.body.childNodes)) {
    const c = copy(n);
    if (c) out.append(c);
  }
  return out;
}

function copy(n) {
  if (n.nodeType === Node.TEXT_NODE) return document.createTextNode(n.textContent);
  if (n.nodeType !== Node.ELEMENT_NODE) return null;
  if (!TAGS.has(n.tagName)) {
    // Unknown elements keep their text (an <img> its alt), never their markup.
    const t = n.tagName === 'IMG' ? n.getAttribute('alt') || '' : n.tagName === 'SCRIPT' || n.tagName === 'STYLE' ? '' : n.textContent;
    return t ? document.createTextNode(t) : null;
  }
  const e = document.createElement(n.tagName);
  switch (n.tagName) {
    case 'A': {
      const href = n.getAttribute('href') || '';
      if (SAFE_URL.test(href)) {
        e.setAttribute('href', href);
        e.setAttribute('target', '_blank');
        e.setAttribute('rel', 'noopener noreferrer nofollow');
      }
      break;
    }
    case 'INPUT':
      if (n.getAttribute('type') !== 'checkbox') return null;
      e.setAttribute('type', 'checkbox');
      e.disabled = true;
      e.checked = n.hasAttribute('checked');
      return e;
    case 'CODE': {
      const cls = n.getAttribute('class') || '';
      if (/^language-[\w+-]+$/.test(cls)) e.className = cls;
      break;
    }
    case 'OL': {
      const start = n.getAttribute('start');
      if (start && /^\d+$/.test(start)) e.setAttribute('start', start);
      break;
    }
  }
  for (const c of Array.from(n.childNodes)) {
    const k = copy(c);
    if (k) e.append(k);
  }
  return e;
}
