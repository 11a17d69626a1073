/**
 * A `vscode` module where every property exists (a callable, constructible stand-in that
 * returns more of the same), with real behaviour only where a test overrides it: enough to
 * load vscode-languageclient and run `activate` without VS Code. Importing this file installs
 * it; import it before the extension.
 */

import Module = require('node:module');

export function anything(name: string, overrides: Record<string, unknown> = {}): any {
  const target: any = function () {
    return anything(`${name}()`);
  };
  Object.assign(target, overrides);
  return new Proxy(target, {
    get(object, property) {
      if (property === 'then') return undefined; // not a promise: `await` must not wait on it
      if (property === 'prototype') return object.prototype;
      if (property === Symbol.toPrimitive) return () => name;
      if (!(property in object)) object[property] = anything(`${name}.${String(property)}`);
      return object[property];
    },
  });
}

export const recorded = { commands: [] as string[], views: [] as string[], errors: [] as string[] };
export const settings: Record<string, unknown> = {};

const disposable = { dispose() {} };
const stub = anything('vscode', {
  version: '1.91.0',
  commands: anything('commands', {
    registerCommand: (id: string) => (recorded.commands.push(id), disposable),
    executeCommand: async () => undefined,
  }),
  window: anything('window', {
    registerWebviewViewProvider: (id: string) => (recorded.views.push(id), disposable),
    showErrorMessage: async (message: string) => (recorded.errors.push(message), undefined),
  }),
  workspace: anything('workspace', {
    getConfiguration: () => ({ get: (key: string) => settings[key] }),
  }),
});

const resolve = (Module as any)._resolveFilename;
(Module as any)._resolveFilename = function (request: string, ...rest: unknown[]) {
  return request === 'vscode' ? 'vscode' : resolve.call(this, request, ...rest);
};
require.cache.vscode = { id: 'vscode', filename: 'vscode', loaded: true, exports: stub } as any;
