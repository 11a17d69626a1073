/**
 * The extension's settings (`opencomposer.*`) and what they mean for the server: the command
 * line that starts it, or the TCP address of one already running, and the initialization
 * options. The engine and the approval policy are command-line flags because the server takes
 * them only from its own config or flags, never from what a client sends. Pure logic.
 */

export type ApprovalSetting = 'auto' | 'ask' | 'deny';

export interface Settings {
  command: string;
  args: string[];
  engine?: string;
  approval?: ApprovalSetting;
  /** Connect to `opencomposer lsp --tcp PORT` instead of starting a server. */
  tcp?: { host: string; port: number; token: string };
  completionEnabled: boolean;
}

/** Reads one setting under `opencomposer.` (workspace configuration or a stub). */
export type Lookup = (key: string) => unknown;

export function readSettings(get: Lookup): Settings {
  const settings: Settings = {
    command: nonEmpty(get('server.command')) ?? 'opencomposer',
    args: Array.isArray(get('server.args')) ? (get('server.args') as unknown[]).map(String) : ['lsp'],
    completionEnabled: get('completion.enabled') !== false,
  };
  const engine = nonEmpty(get('engine'));
  if (engine) settings.engine = engine;
  const approval = get('approval');
  if (approval === 'auto' || approval === 'ask' || approval === 'deny') settings.approval = approval;
  const tcp = get('server.tcp') as { host?: unknown; port?: unknown; token?: unknown } | undefined;
  if (tcp && typeof tcp.port === 'number' && tcp.port > 0) {
    settings.tcp = { host: nonEmpty(tcp.host) ?? '127.0.0.1', port: tcp.port, token: String(tcp.token ?? '') };
  }
  return settings;
}

/** The server's command-line arguments (when the extension starts it). */
export function serverArgs(settings: Settings): string[] {
  const args = [...settings.args];
  if (settings.engine) args.push('--engine', settings.engine);
  if (settings.approval) args.push('--approval', settings.approval);
  return args;
}

/** `initializationOptions`: the editor-side settings, and the token a TCP server requires. */
export function initializationOptions(settings: Settings): Record<string, unknown> {
  const options: Record<string, unknown> = { completion: { enabled: settings.completionEnabled } };
  if (settings.tcp) options.token = settings.tcp.token;
  return options;
}

/** Setting keys whose change needs a new server (the others are sent to the running one). */
export const RESTART_KEYS = ['server.command', 'server.args', 'server.tcp', 'engine', 'approval'];

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
}

/** The opencomposer command line for a subcommand (`traces show ...`), from the server's. */
export function cliCommand(settings: Settings, ...subcommand: string[]): string[] {
  const lsp = settings.args.indexOf('lsp');
  return [settings.command, ...(lsp >= 0 ? settings.args.slice(0, lsp) : settings.args), ...subcommand];
}
