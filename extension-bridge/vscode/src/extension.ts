/**
 * The opencomposer extension: a client of `opencomposer lsp`, which holds all agent logic.
 *
 * vscode-languageclient brings what any LSP editor gets (inline completion, code actions, the
 * server's commands, `workspace/applyEdit`, progress). On top, the client declares
 * `capabilities.experimental.opencomposer`, so the server sends events and approvals over the
 * agent protocol, which `AgentClient` turns into thread models for the chat view.
 */

import * as net from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification, ExecuteCommandRequest, LanguageClient, TransportKind,
  type ClientCapabilities, type FeatureState, type LanguageClientOptions, type ServerOptions,
  type StaticFeature, type StreamInfo,
} from 'vscode-languageclient/node';
import { AgentClient, type AgentListener } from './agentClient';
import { askInNotification } from './approvalPrompt';
import { ChatView, VIEW_ID } from './chatView';
import { BEFORE_SCHEME, BeforeContent } from './fileActions';
import { PROTOCOL_VERSION, type UserInput } from './protocol';
import { ServerWatch } from './serverWatch';
import {
  cliCommand, initializationOptions, readSettings, RESTART_KEYS, serverArgs, type Settings,
} from './settings';

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel('opencomposer', { log: true });
  const before = new BeforeContent();
  let agent: AgentClient | undefined;
  const watch = new ServerWatch(() => log.show());
  const chat = new ChatView(context.extensionUri, () => agent, before, () => folderOf(vscode.window.activeTextEditor));
  const listener: AgentListener = {
    threadChanged: (threadId, applied) => chat.threadChanged(threadId, applied),
    approvalRequested: (threadId, item) => {
      chat.approvalChanged(threadId, item.id);
      // The chat shows its own buttons, when it is on screen and shows that thread.
      if (!chat.visible || chat.currentThread !== threadId) {
        void askInNotification(item).then((answer) => agent?.answerApproval(item.id, answer));
      }
    },
    approvalSettled: (threadId, itemId) => chat.approvalChanged(threadId, itemId),
  };

  async function start(): Promise<void> {
    const settings = currentSettings();
    try {
      client = createClient(settings, log, watch);
      agent = new AgentClient(client, listener, (message) => log.info(message));
      await client.start();
    } catch (error) {
      void vscode.window.showErrorMessage(
        `opencomposer: the language server did not start (${settings.tcp ? `tcp ${settings.tcp.host}:${settings.tcp.port}`
          : [settings.command, ...serverArgs(settings)].join(' ')}): ${error}`, 'Open settings', 'Show log',
      ).then((choice) => {
        if (choice === 'Open settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'opencomposer');
        if (choice === 'Show log') log.show();
      });
    }
  }

  async function restart(): Promise<void> {
    const old = client;
    client = agent = undefined;
    await old?.dispose().catch(() => undefined);
    watch.reset();
    await start();
    chat.show(chat.currentThread); // reloaded from the new server
  }

  /** Fix / Explain / Write tests: the server's commands, on the active editor's selection, in
   * the chat's thread (which shows the turn). */
  async function editorAction(action: 'fix' | 'explain' | 'tests'): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !client) {
      void vscode.window.showWarningMessage('opencomposer: open a file (and a running server) first.');
      return;
    }
    const { range, diagnostics } = await actionTarget(editor, action);
    const c2p = client.code2ProtocolConverter;
    const argument = {
      uri: c2p.asUri(editor.document.uri), range: c2p.asRange(range),
      ...(action === 'fix' ? { diagnostics: await c2p.asDiagnostics(diagnostics) } : {}),
    };
    chat.reveal();
    await chat.runCommand(`opencomposer.${action}`, argument, editor.document.uri.fsPath, folderOf(editor));
  }

  const command = (name: string, run: () => unknown) => vscode.commands.registerCommand(name, async () => {
    try {
      await run();
    } catch (error) {
      void vscode.window.showErrorMessage(`opencomposer: ${(error as Error)?.message ?? error}`);
    }
  });

  context.subscriptions.push(
    log,
    vscode.window.registerWebviewViewProvider(VIEW_ID, chat),
    vscode.workspace.registerTextDocumentContentProvider(BEFORE_SCHEME, before),
    command('opencomposer.chat.ask', async () => {
      const text = await vscode.window.showInputBox({ prompt: 'Ask opencomposer', ignoreFocusOut: true });
      if (!text?.trim()) return;
      const editor = vscode.window.activeTextEditor;
      chat.reveal();
      const root = chat.currentThread ? agent?.threads.get(chat.currentThread).thread?.workspace : folderOf(editor);
      await chat.send([{ type: 'text', text }, ...reference(editor, root)], folderOf(editor));
    }),
    command('opencomposer.chat.fix', () => editorAction('fix')),
    command('opencomposer.chat.explain', () => editorAction('explain')),
    command('opencomposer.chat.tests', () => editorAction('tests')),
    command('opencomposer.chat.newThread', () => {
      chat.show(undefined);
      chat.reveal();
    }),
    command('opencomposer.chat.stop', async () => {
      // Turns started by plain commands (code actions) are stopped by the server's command.
      if (!(await chat.stop()) && client) {
        await client.sendRequest(ExecuteCommandRequest.type, { command: 'opencomposer.stop', arguments: [] });
      }
    }),
    command('opencomposer.chat.history', async () => {
      if (!agent) throw new Error('the server is not running');
      const folder = folderOf(vscode.window.activeTextEditor);
      const threads = await agent.listThreads(folder);
      const picked = await vscode.window.showQuickPick(threads.map((thread) => ({
        label: thread.title || thread.id, description: thread.updated_at?.replace('T', ' ').slice(0, 16),
        id: thread.id,
      })), { placeHolder: folder ? `Open a thread of ${path.basename(folder)}` : 'Open a thread' });
      if (picked) {
        chat.show(picked.id);
        chat.reveal();
      }
    }),
    command('opencomposer.showTraces', () => {
      const [program, ...args] = cliCommand(currentSettings(), 'traces',
        ...(chat.currentThread ? ['show', chat.currentThread] : ['list']));
      vscode.window.createTerminal({ name: 'opencomposer traces', shellPath: program, shellArgs: args }).show();
    }),
    command('opencomposer.showLog', () => log.show()),
    command('opencomposer.restartServer', restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_KEYS.some((key) => event.affectsConfiguration(`opencomposer.${key}`))) {
        void restart();
      } else if (event.affectsConfiguration('opencomposer.completion') && client?.isRunning()) {
        void client.sendNotification(DidChangeConfigurationNotification.type,
          { settings: { opencomposer: { completion: { enabled: currentSettings().completionEnabled } } } });
      }
    }),
  );
  // Not awaited: the server may take a while (an embedded engine loads its model), and the
  // commands and the view work, or say why not, meanwhile.
  void start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}

function currentSettings(): Settings {
  const configuration = vscode.workspace.getConfiguration('opencomposer');
  return readSettings((key) => configuration.get(key));
}

function createClient(settings: Settings, log: vscode.LogOutputChannel, watch: ServerWatch): LanguageClient {
  const tcp = settings.tcp;
  // LSP over the server's stdin and stdout: the client appends `--stdio`, which
  // `opencomposer lsp` takes (it is its default transport).
  const serverOptions: ServerOptions = tcp
    ? () => connect(tcp.host, tcp.port)
    : { command: settings.command, args: serverArgs(settings), transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file' }],
    outputChannel: log,
    errorHandler: watch,
    // Both handlers are required; stdout carries the protocol over stdio, so only another
    // transport would hand it to the first.
    stdioOptions: {
      stdout: (input, channel) => readline.createInterface({ input, terminal: false }).on('line', (line) => channel.info(line)),
      stderr: (input, channel) => watch.stderr(input, channel),
    },
    initializationOptions: initializationOptions(settings),
    middleware: {
      // Skips the round trip; the server also knows the setting (initialization options).
      provideInlineCompletionItems: (document, position, context, token, next) =>
        (currentSettings().completionEnabled ? next(document, position, context, token) : undefined),
    },
  };
  const languageClient = new LanguageClient('opencomposer', 'opencomposer', serverOptions, clientOptions);
  languageClient.registerFeature(new AgentProtocolFeature());
  return languageClient;
}

/** Declares `capabilities.experimental.opencomposer`: this client renders events and answers
 * approvals, so the server sends them over the agent protocol instead of plain LSP prompts. */
class AgentProtocolFeature implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    capabilities.experimental = { ...experimental, opencomposer: { protocolVersion: PROTOCOL_VERSION } };
  }

  initialize(): void {}

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {}
}

function connect(host: string, port: number): Promise<StreamInfo> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host, () => resolve({ reader: socket, writer: socket }));
    socket.once('error', reject);
  });
}

function folderOf(editor: vscode.TextEditor | undefined): string | undefined {
  const folder = editor && vscode.workspace.getWorkspaceFolder(editor.document.uri);
  return (folder ?? vscode.workspace.workspaceFolders?.[0])?.uri.fsPath;
}

/** The editor's selection (or file) as a file reference, as the user sees it (unsaved). */
function reference(editor: vscode.TextEditor | undefined, root: string | undefined): UserInput[] {
  if (!editor || editor.document.uri.scheme !== 'file') return [];
  const file = editor.document.uri.fsPath;
  const relative = root ? path.relative(root, file) : file;
  const reference: UserInput = {
    type: 'file', path: relative.startsWith('..') || path.isAbsolute(relative) ? file : relative.split(path.sep).join('/'),
  };
  const selection = editor.selection;
  if (!selection.isEmpty) {
    const last = selection.end.character === 0 && selection.end.line > selection.start.line
      ? selection.end.line - 1 : selection.end.line;
    reference.range = { start: selection.start.line + 1, end: last + 1 };
    reference.text = editor.document.getText(new vscode.Range(selection.start.line, 0, last + 1, 0));
  }
  return [reference];
}

/** What an editor action works on: the selection; else, for a fix, the diagnostics at the
 * cursor; else the function or class around the cursor, or the whole file. */
async function actionTarget(editor: vscode.TextEditor, action: string
): Promise<{ range: vscode.Range; diagnostics: vscode.Diagnostic[] }> {
  const { document, selection } = editor;
  const around = selection.isEmpty ? document.lineAt(selection.active.line).range : selection;
  const diagnostics = vscode.languages.getDiagnostics(document.uri).filter((d) => d.range.intersection(around));
  if (!selection.isEmpty) return { range: selection, diagnostics };
  if (action === 'fix' && diagnostics.length) {
    return { range: diagnostics.map((d) => d.range).reduce((a, b) => a.union(b)), diagnostics };
  }
  const symbols = await vscode.commands.executeCommand<vscode.DocumentSymbol[] | undefined>(
    'vscode.executeDocumentSymbolProvider', document.uri).then((s) => s ?? [], () => []);
  const enclosing = innermost(symbols, selection.active);
  return { range: enclosing ?? new vscode.Range(0, 0, document.lineCount, 0), diagnostics };
}

const CODE_SYMBOLS = new Set([vscode.SymbolKind.Function, vscode.SymbolKind.Method,
  vscode.SymbolKind.Class, vscode.SymbolKind.Constructor]);

/** The innermost function, method or class containing a position. */
function innermost(symbols: vscode.DocumentSymbol[], at: vscode.Position): vscode.Range | undefined {
  for (const symbol of symbols) {
    if (!('range' in symbol) || !symbol.range.contains(at)) continue;
    const inner = innermost(symbol.children ?? [], at);
    if (inner) return inner;
    if (CODE_SYMBOLS.has(symbol.kind)) return symbol.range;
  }
  return undefined;
}
