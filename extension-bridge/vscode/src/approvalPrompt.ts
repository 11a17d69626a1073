/**
 * An approval asked in a notification, for when the chat view (which shows its own buttons) is
 * not on screen. Dismissing the notification denies, as the server's plain-LSP prompt does.
 */

import * as vscode from 'vscode';
import type { ApprovalAnswer, ApprovalRequestItem } from './protocol';
import { APPROVAL_BUTTONS } from './render';

export async function askInNotification(item: ApprovalRequestItem): Promise<ApprovalAnswer> {
  const labels = APPROVAL_BUTTONS.map((button) => button.label);
  const chosen = await vscode.window.showWarningMessage(
    `opencomposer wants to run ${item.tool}: ${item.summary}`,
    { detail: item.reason }, ...labels);
  const button = APPROVAL_BUTTONS.find((b) => b.label === chosen);
  return button ? { decision: button.decision }
    : { decision: 'deny', message: 'the user dismissed the approval prompt' };
}
