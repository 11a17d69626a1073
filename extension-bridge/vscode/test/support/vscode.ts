/**
 * A stand-in for the `vscode` module (no VS Code binary can run these tests): just what the
 * extension's modules touch, with hooks a test sets (`stub.window.showWarningMessage = ...`).
 * Importing this file installs it; import it before any module that imports `vscode`.
 */

import Module = require('node:module');

export class Uri {
  private constructor(readonly scheme: string, readonly path: string, readonly query = '') {}

  static file(path: string): Uri {
    return new Uri('file', path);
  }

  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, [base.path, ...parts].join('/').replace(/\/+/g, '/'), base.query);
  }

  static from(parts: { scheme: string; path: string; query?: string }): Uri {
    return new Uri(parts.scheme, parts.path, parts.query);
  }

  get fsPath(): string {
    return this.path;
  }

  toString(): string {
    return `${this.scheme}://${this.path}${this.query ? `?${this.query}` : ''}`;
  }
}

type Handler = (...args: any[]) => any;

export const stub = {
  Uri,
  window: {
    showWarningMessage: (async () => undefined) as Handler,
    showErrorMessage: (async () => undefined) as Handler,
    showInformationMessage: (async () => undefined) as Handler,
    showTextDocument: (async () => undefined) as Handler,
  },
  commands: {
    executed: [] as unknown[][],
    executeCommand: async (...args: unknown[]) => {
      stub.commands.executed.push(args);
    },
  },
  workspace: {},
};

const resolve = (Module as any)._resolveFilename;
(Module as any)._resolveFilename = function (request: string, ...rest: unknown[]) {
  return request === 'vscode' ? 'vscode' : resolve.call(this, request, ...rest);
};
require.cache.vscode = { id: 'vscode', filename: 'vscode', loaded: true, exports: stub } as any;
