// The fake sharer's page: implements window.linkfsShare (web/src/api.ts) over plain HTTP
// to the fake sharer, and mirrors the connection state on body[data-state] and
// [data-testid=status] like the real web app. Test-harness code only.
(async () => {
  const status = document.querySelector('[data-testid=status]');
  const listeners = new Set();
  let current = { state: 'connecting', message: 'Connecting to the sharer' };
  const setStatus = (state, message) => {
    current = { state, message };
    document.body.dataset.state = state;
    status.textContent = message;
    for (const fn of listeners) fn({ type: 'status', status: current });
  };
  const fragment = location.hash.slice(1);
  const dot = fragment.lastIndexOf('.');
  const response = await fetch('/index', { headers: { 'x-room': fragment.slice(0, dot), 'x-secret': fragment.slice(dot + 1) } });
  if (response.status === 403) {
    setStatus('invalid-link', 'This link is not valid: check that you copied all of it.');
    return;
  }
  const text = await response.text();
  const entries = JSON.parse(text);
  const byId = new Map(entries.map((e) => [e.id, e]));
  const children = new Map();
  for (const e of entries) {
    if (e.id === 0) continue;
    if (!children.has(e.parent)) children.set(e.parent, []);
    children.get(e.parent).push(e);
  }
  const compare = {
    name: (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    size: (a, b) => a.size - b.size || compare.name(a, b),
    mtime: (a, b) => a.mtime - b.mtime || compare.name(a, b),
    kind: (a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0) || compare.name(a, b),
  };
  const progress = { received: entries.length, announced: entries.length, complete: true, persisted: entries.length, fromCache: 0 };
  window.linkfsStats = () => ({ indexWireBytes: text.length });
  window.linkfsShare = {
    rootId: 0,
    status: () => current,
    progress: () => progress,
    subscribe(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    async list(dir, sort, descending, start, count) {
      const kids = [...(children.get(dir) ?? [])].sort(compare[sort]);
      if (descending) kids.reverse();
      return { dir, total: kids.length, start, rows: kids.slice(start, start + count) };
    },
    async entry(id) {
      return byId.get(id) ?? null;
    },
    async path(id) {
      const out = [];
      for (let e = byId.get(id); e !== undefined; e = e.id === 0 ? undefined : byId.get(e.parent)) out.unshift(e);
      return out;
    },
    async lookup(path) {
      let e = byId.get(0);
      for (const name of path === '' ? [] : path.split('/')) {
        e = (children.get(e.id) ?? []).find((c) => c.name === name);
        if (e === undefined) return null;
      }
      return e;
    },
    async read(id, options = {}) {
      const r = await fetch(`/file/${id}`, { signal: options.signal });
      if (!r.ok) throw new Error(`read ${id}: ${r.status} ${await r.text()}`);
      const blob = await r.blob();
      options.onProgress?.({ done: blob.size, total: blob.size });
      return blob;
    },
    close() {},
  };
  setStatus('connected', 'Connected to the sharer');
  const alive = setInterval(async () => {
    try {
      const r = await fetch('/alive', { signal: AbortSignal.timeout(1000) });
      if (!r.ok) throw new Error(String(r.status));
    } catch {
      clearInterval(alive);
      setStatus('sharer-gone', 'The sharer stopped sharing this folder.');
    }
  }, 300);
})();
