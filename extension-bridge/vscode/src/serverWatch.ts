/**
 * What the user sees when the language server stops on its own: a message that says so, with
 * the last error it wrote, each time it is restarted; and, when it keeps stopping, that it
 * will not be restarted and how to start it again. vscode-languageclient's default handler
 * restarts silently and speaks only when it gives up.
 *
 * The server writes only errors to stderr (lower levels reach the client's output channel
 * as `window/logMessage`, each at its level), so every stderr line is shown as an error and
 * the last ones explain a crash.
 */

import * as readline from 'node:readline';
import type { Readable } from 'node:stream';
import * as vscode from 'vscode';
import {
  CloseAction, ErrorAction, type CloseHandlerResult, type ErrorHandler, type ErrorHandlerResult,
} from 'vscode-languageclient/node';

/** More stops than this within `WINDOW_MS` and the server is left stopped. */
export const MAX_RESTARTS = 4;
export const WINDOW_MS = 3 * 60 * 1000;
/** A write or read error on the connection is retried this many times before it shuts down. */
const MAX_CONNECTION_ERRORS = 3;
/** A stderr line is "recent" (part of why the server stopped) for this long. */
const RECENT_MS = 10_000;

interface Line {
  at: number;
  text: string;
}

export class ServerWatch implements ErrorHandler {
  private readonly stops: number[] = [];
  private lastError?: Line;

  constructor(private readonly showLog: () => void, private readonly now: () => number = Date.now) {}

  /** `stdioOptions.stderr`: each line to the output channel as an error, the last kept. */
  stderr(input: Readable, channel: vscode.LogOutputChannel): void {
    readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
      .on('line', (text) => {
        channel.error(text);
        if (text.trim()) this.lastError = { at: this.now(), text: text.trim() };
      });
  }

  error(_error: Error, _message: unknown, count: number | undefined): ErrorHandlerResult {
    return { action: count !== undefined && count <= MAX_CONNECTION_ERRORS ? ErrorAction.Continue : ErrorAction.Shutdown };
  }

  closed(): CloseHandlerResult {
    const now = this.now();
    this.stops.push(now);
    while (this.stops.length && now - this.stops[0] > WINDOW_MS) this.stops.shift();
    const recent = this.lastError && now - this.lastError.at <= RECENT_MS ? `: ${this.lastError.text}` : '';
    this.lastError = undefined;
    const giveUp = this.stops.length > MAX_RESTARTS;
    const message = giveUp
      ? `opencomposer: the language server stopped ${this.stops.length} times in 3 minutes${recent}. It is not `
        + 'restarted again; run "opencomposer: Restart server" once the cause is fixed.'
      : `opencomposer: the language server stopped unexpectedly${recent}. Restarting it.`;
    const shown = giveUp ? vscode.window.showErrorMessage(message, 'Show log')
      : vscode.window.showWarningMessage(message, 'Show log');
    void Promise.resolve(shown).then((choice) => { if (choice === 'Show log') this.showLog(); });
    return { action: giveUp ? CloseAction.DoNotRestart : CloseAction.Restart, message, handled: true };
  }

  /** A restart the user asked for starts the count afresh. */
  reset(): void {
    this.stops.length = 0;
    this.lastError = undefined;
  }
}
