/**
 * Characters that can forge or hide output on a terminal or in a log: C0 and C1 controls (newline,
 * carriage return, ESC, CSI), DEL, line and paragraph separators, lone surrogates, and every format
 * character: bidirectional marks and overrides, and the invisible ones (zero-width spaces and
 * joiners, a byte-order mark, a soft hyphen) that make `chat-7` and `chat-7\u200b` look alike. IDs
 * come from Redis keys and log entries that anyone with write access can fill.
 */
const CONTROL_CLASS = String.raw`\p{Cc}\p{Cf}\p{Cs}\u2028\u2029`;
const CONTROLS = new RegExp(`[${CONTROL_CLASS}]`, 'gu');
/** One character of {@link CONTROLS}, for a test without the global flag's state. */
export const CONTROL_CHARACTER = new RegExp(`[${CONTROL_CLASS}]`, 'u');
const CONTROLS_AND_BACKSLASH = new RegExp(String.raw`[\\${CONTROL_CLASS}]`, 'gu');

const SHORT: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `ch` as escapes, one per UTF-16 unit: a format character above U+FFFF (a tag character) takes two. */
function escape(ch: string): string {
  return SHORT[ch] ?? Array.from({ length: ch.length }, (_, i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');
}

/**
 * An ID as the human output shows it: every control character written as a JSON-style escape
 * (`\n`, `\u001b`), and a backslash as `\\` so that an escape and the same characters typed
 * literally never look alike. `--json` output is never passed through it.
 */
export function printable(text: string): string {
  return text.replace(CONTROLS_AND_BACKSLASH, escape);
}

/** An ID in double quotes, as {@link printable} with `"` escaped too: `scope "chat\n7"`. */
export function quoted(text: string): string {
  return `"${printable(text).replace(/"/g, '\\"')}"`;
}

/** A line the CLI composed around IDs it did not quote: only its control characters escaped. */
export function controlsEscaped(text: string): string {
  return text.replace(CONTROLS, escape);
}
