/**
 * The opencomposer agent protocol as this extension uses it: TypeScript mirrors of the payloads
 * in extension-bridge/protocol/opencomposer-protocol.schema.json (generated from the server's
 * pydantic models). Field names are snake_case as on the wire. test/protocol.test.ts fails when
 * the item, event and method names here drift from the schema.
 */

export const PROTOCOL_VERSION = 1;

/** Over LSP every method is `opencomposer/<resource>/<verb>`. */
export const METHODS = {
  threadStart: 'opencomposer/thread/start',
  threadList: 'opencomposer/thread/list',
  threadRead: 'opencomposer/thread/read',
  threadEvents: 'opencomposer/thread/events',
  threadSubscribe: 'opencomposer/thread/subscribe',
  threadUndo: 'opencomposer/thread/undo',
  turnStart: 'opencomposer/turn/start',
  turnInterrupt: 'opencomposer/turn/interrupt',
  turnSteer: 'opencomposer/turn/steer',
} as const;

/** Server -> client notification: one event of a followed thread. */
export const EVENT_METHOD = 'opencomposer/event';
/** Server -> client request: may this tool call run? (`approval/request` in the schema.) */
export const APPROVAL_METHOD = 'opencomposer/approval/request';

// ------------------------------------------------------------------ common

export interface LineRange { start: number; end: number }

export interface ErrorInfo { kind: string; message: string; retryable?: boolean }

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cached_prompt_tokens: number;
  model_calls: number;
  /** Some tokens were estimated: a call was cut short, or the engine reports no usage. */
  estimated: boolean;
}

export type ActionClass = 'read_only' | 'writes_workspace' | 'dangerous' | 'network';

// ------------------------------------------------------------------ input

export interface TextInput { type: 'text'; text: string }

export interface FileReference {
  type: 'file';
  /** Relative to the workspace root (absolute paths inside it are accepted). */
  path: string;
  range?: LineRange | null;
  /** The referenced text as the user sees it (unsaved buffers). */
  text?: string | null;
  note?: string | null;
}

export type UserInput = TextInput | FileReference;

// ------------------------------------------------------------------ items

export type ItemStatus = 'in_progress' | 'completed' | 'failed' | 'interrupted' | 'declined';

export interface ItemFields {
  id: string;
  turn_id: string;
  status: ItemStatus;
  started_at?: string;
  completed_at?: string | null;
  step?: number | null;
}

export interface UserMessageItem extends ItemFields {
  type: 'user_message';
  content: UserInput[];
  steer?: boolean;
  context?: string | null;
}

export interface AgentMessageItem extends ItemFields { type: 'agent_message'; text: string }

export interface ReasoningItem extends ItemFields { type: 'reasoning'; text: string }

export interface ToolCallFields extends ItemFields {
  call_id: string;
  tool: string;
  arguments: Record<string, unknown>;
  arguments_text?: string;
  action_class?: ActionClass | null;
  output?: string | null;
  error?: ErrorInfo | null;
  duration_ms?: number | null;
}

export interface ToolCallItem extends ToolCallFields { type: 'tool_call' }

export interface CommandExecutionItem extends ToolCallFields {
  type: 'command_execution';
  command: string;
  cwd?: string;
  exit_code?: number | null;
  timed_out?: boolean;
  background_id?: string | null;
  sandbox?: string | null;
}

export type FileChangeKind = 'add' | 'update' | 'delete' | 'move';

export interface FileChange {
  path: string;
  kind: FileChangeKind;
  /** Unified diff; empty for binary files, cut (with a note) when very long. */
  diff: string;
  move_to?: string | null;
}

export interface FileChangeItem extends ToolCallFields { type: 'file_change'; changes: FileChange[] }

export interface SearchItem extends ToolCallFields {
  type: 'search';
  query: string;
  method?: string;
  match_count?: number | null;
  file_count?: number | null;
  truncated?: boolean;
}

export interface FileReadItem extends ToolCallFields {
  type: 'file_read';
  path: string;
  range?: LineRange | null;
  total_lines?: number | null;
}

export type TodoStatus = 'pending' | 'in_progress' | 'completed';

export interface TodoListItem extends ToolCallFields {
  type: 'todo_list';
  todos: { content: string; status: TodoStatus }[];
}

export interface ContextSummaryItem extends ItemFields {
  type: 'context_summary';
  text: string;
  state?: string;
  method?: 'model' | 'truncation';
  tokens_before?: number | null;
  tokens_after?: number | null;
  summary_index?: number;
}

export type ApprovalDecision = 'approve' | 'approve_for_thread' | 'deny' | 'abort';

export interface ApprovalRequestItem extends ItemFields {
  type: 'approval_request';
  target_item_id: string;
  tool: string;
  action_class: ActionClass;
  summary: string;
  reason: string;
  decision?: ApprovalDecision | null;
  decided_by?: 'client' | 'policy' | 'no_client' | null;
  message?: string | null;
}

export interface ErrorItem extends ItemFields { type: 'error'; error: ErrorInfo }

export type Item =
  | UserMessageItem | AgentMessageItem | ReasoningItem | ToolCallItem | CommandExecutionItem
  | FileChangeItem | SearchItem | FileReadItem | TodoListItem | ContextSummaryItem
  | ApprovalRequestItem | ErrorItem;

export const ITEM_TYPES: readonly Item['type'][] = [
  'user_message', 'agent_message', 'reasoning', 'tool_call', 'command_execution', 'file_change',
  'search', 'file_read', 'todo_list', 'context_summary', 'approval_request', 'error',
];

export interface TextDelta { kind: 'text'; text: string }
export interface OutputDelta { kind: 'output'; stream?: 'stdout' | 'stderr'; text: string }
export type ItemDelta = TextDelta | OutputDelta;

// ------------------------------------------------------------------ threads and turns

export interface Thread {
  id: string;
  workspace: string;
  title?: string | null;
  model?: string | null;
  created_at?: string;
  updated_at?: string;
}

export type TurnStatus = 'in_progress' | 'completed' | 'interrupted' | 'failed';

export interface Turn {
  id: string;
  thread_id: string;
  status: TurnStatus;
  stop_reason?: string | null;
  usage?: TokenUsage;
  error?: ErrorInfo | null;
  started_at?: string;
  completed_at?: string | null;
}

export interface TurnWithItems extends Turn {
  /** The turn's items in log order, each in its latest state. */
  items: Item[];
}

// ------------------------------------------------------------------ events

interface EventFields { seq: number; thread_id: string; at?: string }

export interface ThreadStartedEvent extends EventFields { type: 'thread.started'; thread: Thread }
export interface TurnStartedEvent extends EventFields { type: 'turn.started'; turn: Turn }
export interface ItemStartedEvent extends EventFields { type: 'item.started'; item: Item }
export interface ItemDeltaEvent extends EventFields {
  type: 'item.delta';
  turn_id: string;
  item_id: string;
  delta: ItemDelta;
}
export interface ItemCompletedEvent extends EventFields { type: 'item.completed'; item: Item }
export interface TurnCompletedEvent extends EventFields { type: 'turn.completed'; turn: Turn }

export type Event =
  | ThreadStartedEvent | TurnStartedEvent | ItemStartedEvent | ItemDeltaEvent
  | ItemCompletedEvent | TurnCompletedEvent;

export const EVENT_TYPES: readonly Event['type'][] = [
  'thread.started', 'turn.started', 'item.started', 'item.delta', 'item.completed',
  'turn.completed',
];

// ------------------------------------------------------------------ method payloads

export interface ThreadStartParams { workspace: string; title?: string }
export interface ThreadStartResponse { thread: Thread }
/** `workspace`: only the threads of this folder (absolute path). */
export interface ThreadListParams { cursor?: string; limit?: number; workspace?: string }
export interface ThreadListResponse { data: Thread[]; next_cursor?: string | null }
export interface ThreadReadParams { thread_id: string }
/** `last_seq`: the thread's last event when it was read; subscribe after it. */
export interface ThreadReadResponse { thread: Thread; turns: TurnWithItems[]; last_seq: number }
export interface ThreadEventsParams { thread_id: string; after_seq: number; limit?: number }
export interface ThreadEventsResponse { events: Event[]; has_more: boolean }
/** Events after `after_seq`, then live ones, arrive as `opencomposer/event` notifications. */
export interface ThreadSubscribeParams { thread_id: string; after_seq: number }
export interface ThreadSubscribeResponse { last_seq: number }
export type UndoScope = 'edit' | 'turn' | 'thread';
export interface ThreadUndoParams { thread_id: string; scope: UndoScope; turn_id?: string }
/** `conflicts`: files changed since the agent wrote them, left as they are. `unrestorable`:
 * secret files (`.env`) the edits changed, whose contents are never kept, so not put back. */
export interface ThreadUndoResponse {
  restored: FileChange[]; conflicts: string[]; unrestorable: string[];
}
export interface TurnStartParams { thread_id: string; input: UserInput[] }
export interface TurnStartResponse { turn: Turn }
export interface TurnInterruptParams { thread_id: string; turn_id: string }
export interface TurnInterruptResponse { turn: Turn }
export interface TurnSteerParams { thread_id: string; turn_id: string; input: UserInput[] }
export interface TurnSteerResponse { item_id: string }
export interface ApprovalRequestParams { thread_id: string; item: ApprovalRequestItem }
export interface ApprovalAnswer { decision: ApprovalDecision; message?: string }
