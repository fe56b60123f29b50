import type { Command } from 'commander';
import { redactUrl } from './connect';
import { CliError, EXIT } from './exit-codes';

/**
 * Refuse two argument lists that commander would take quietly, each acting on something the
 * operator did not name:
 *
 * - an option followed by another option instead of its value: commander takes the next argument
 *   whatever it is, so `release s --step --force` looked for a lock of step `--force`, and
 *   `inspect s --namespace --json` read namespace `--json` and said nothing was stored;
 * - an option given twice: commander keeps the last value, so `release s --step a --step b
 *   --force` released step `b`.
 *
 * A value that starts with `--` is given joined to its option: `--step=--force`. `args` is the
 * command line after node and the script; arguments after `--` are operands and are not read.
 */
export function checkOptionValues(program: Command, args: readonly string[]): void {
  const command = program.commands.find((c) => c.name() === args[0]);
  if (command === undefined) return; // --help, --version, or an unknown command: commander says
  const valued = command.options.filter((o) => o.required || o.optional);
  const given = new Map<string, string[]>();
  for (let i = 1; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') break;
    const option = valued.find((o) => arg === o.long || arg === o.short || (o.long !== undefined && arg.startsWith(`${o.long}=`)));
    if (option === undefined) continue;
    const name = option.long ?? arg;
    let value: string;
    if (arg !== name && arg !== option.short) value = arg.slice(name.length + 1);
    else {
      const next = args[i + 1];
      if (next === undefined) continue; // commander says the value is missing
      if (next.startsWith('--') || next === '-h') {
        throw new CliError(
          `option ${name} is missing its value: the next argument, ${JSON.stringify(next)}, is an option (write ${name}=${next} if that is the value)`,
          EXIT.usage,
        );
      }
      value = next;
      i++;
    }
    given.set(name, [...(given.get(name) ?? []), value]);
  }
  for (const [name, values] of given) {
    if (values.length > 1) {
      // A --redis value is a URL that may hold a password: never quote it as given.
      const shown = values.map((v) => JSON.stringify(name === '--redis' ? redactUrl(v) : v));
      throw new CliError(`option ${name} is given more than once (${shown.join(', ')}): give it once`, EXIT.usage);
    }
  }
}
