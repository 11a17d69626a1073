// The chat view's webview side: shows the markup the extension renders (escaped there, see
// src/render.ts) and sends back what the user does. It keeps no thread state of its own.
// @ts-check
(function () {
  // @ts-ignore acquireVsCodeApi is injected by VS Code
  const vscode = acquireVsCodeApi();
  const items = /** @type {HTMLElement} */ (document.getElementById('items'));
  const input = /** @type {HTMLTextAreaElement} */ (document.getElementById('input'));
  const send = /** @type {HTMLButtonElement} */ (document.getElementById('send'));
  const stop = /** @type {HTMLButtonElement} */ (document.getElementById('stop'));
  const title = /** @type {HTMLElement} */ (document.getElementById('title'));
  const error = /** @type {HTMLElement} */ (document.getElementById('error'));

  /** @param {string} id @param {string} html */
  function element(id, html) {
    const wrapper = document.createElement('div');
    wrapper.className = 'entry';
    wrapper.dataset.id = id;
    wrapper.innerHTML = html;
    return wrapper;
  }

  /** @param {string} id */
  function find(id) {
    return Array.from(items.children).find((child) => /** @type {HTMLElement} */ (child).dataset.id === id);
  }

  function atBottom() {
    return items.scrollHeight - items.scrollTop - items.clientHeight < 40;
  }

  window.addEventListener('message', (event) => {
    const message = event.data;
    const follow = atBottom();
    if (message.type === 'reset') {
      items.replaceChildren(...message.items.map((/** @type {any} */ i) => element(i.id, i.html)));
    } else if (message.type === 'upsert') {
      for (const item of message.items) {
        const existing = find(item.id);
        if (existing) {
          // Keep <details> open or closed as the user left them.
          const open = Array.from(existing.querySelectorAll('details')).map((d) => d.open);
          existing.innerHTML = item.html;
          existing.querySelectorAll('details').forEach((d, i) => { if (i < open.length) d.open = open[i]; });
        } else {
          items.insertBefore(element(item.id, item.html), items.children[item.index] ?? null);
        }
      }
    } else if (message.type === 'status') {
      title.textContent = message.title;
      stop.hidden = !message.running;
      send.textContent = message.running ? 'Steer' : 'Send';
    } else if (message.type === 'error') {
      error.textContent = message.message;
      error.hidden = false;
    }
    if (follow) items.scrollTop = items.scrollHeight;
  });

  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    error.hidden = true;
    vscode.postMessage({ type: 'send', text });
    input.value = '';
  }

  send.addEventListener('click', submit);
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  stop.addEventListener('click', () => vscode.postMessage({ type: 'stop' }));
  document.getElementById('new')?.addEventListener('click', () => vscode.postMessage({ type: 'newThread' }));
  document.getElementById('history')?.addEventListener('click', () => vscode.postMessage({ type: 'history' }));

  // Buttons inside items say what they do with data-action (no inline handlers: the CSP
  // forbids them).
  items.addEventListener('click', (event) => {
    const button = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (event.target).closest('[data-action]'));
    if (!button) return;
    const data = button.dataset;
    if (data.action === 'approval') {
      const note = /** @type {HTMLInputElement | null} */ (button.closest('.approval')?.querySelector('.approval-note') ?? null);
      vscode.postMessage({ type: 'approval', itemId: data.item, decision: data.decision, message: note?.value || undefined });
      button.closest('.buttons')?.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    } else if (data.action === 'openFile') {
      vscode.postMessage({ type: 'openFile', path: data.path, lines: data.lines });
    } else if (data.action === 'openDiff') {
      vscode.postMessage({ type: 'openDiff', itemId: data.item, index: Number(data.index) });
    } else if (data.action === 'revertTurn') {
      vscode.postMessage({ type: 'revertTurn', turnId: data.turn });
    }
  });

  vscode.postMessage({ type: 'ready' });
})();
