import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

/**
 * docker-compose.yml cannot run here (no Docker engine), so this checks what can go stale
 * without anyone noticing: the services, images and published ports, and that the environment
 * variables the service helpers read are documented with values that match those ports.
 */

const root = join(__dirname, '..');
const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');

interface ComposeService {
  image?: string;
  command?: string | string[];
  ports?: (string | number)[];
}
const compose = parse(composeText) as { services?: Record<string, ComposeService> };
const services = compose.services ?? {};

/** The "host:container" pairs a service publishes, as strings. */
function published(service: ComposeService | undefined): string[] {
  return (service?.ports ?? []).map(String);
}

/** The command as a list of words. */
function commandWords(service: ComposeService | undefined): string[] {
  const command = service?.command ?? [];
  return Array.isArray(command) ? command : command.split(/\s+/).filter(Boolean);
}

/** The environment variables the service helpers in sample-workflows/services read. */
function envNamesReadByServices(): Set<string> {
  const dir = join(root, 'sample-workflows', 'services');
  const names = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    for (const match of readFileSync(join(dir, file), 'utf8').matchAll(/process\.env\.([A-Z0-9_]+)/g)) names.add(match[1]!);
  }
  return names;
}

/** The `export NAME=value` lines of the comment header, by name. */
function documentedEnv(): Map<string, string> {
  const header = composeText.split('\n').filter((line) => line.startsWith('#'));
  const env = new Map<string, string>();
  for (const line of header) {
    const match = /^#\s+(?:export\s+)?([A-Z][A-Z0-9_]*)=(\S+)\s*$/.exec(line);
    if (match) env.set(match[1]!, match[2]!);
  }
  return env;
}

describe('docker-compose.yml', () => {
  it('defines exactly the temporal and redis services', () => {
    expect(Object.keys(services).sort()).toEqual(['redis', 'temporal']);
  });

  it('runs the Temporal CLI dev server, reachable from the host on 7233 and its UI on 8233', () => {
    const temporal = services.temporal;
    expect(temporal?.image).toMatch(/^temporalio\/temporal(:[\w.-]+)?$/);
    const words = commandWords(temporal);
    expect(words.slice(0, 2)).toEqual(['server', 'start-dev']);
    // Without --ip 0.0.0.0 the dev server listens on the container's loopback only.
    expect(words[words.indexOf('--ip') + 1]).toBe('0.0.0.0');
    expect(published(temporal)).toEqual(expect.arrayContaining(['7233:7233', '8233:8233']));
  });

  it('runs Redis 7 published on 6379', () => {
    expect(services.redis?.image).toBe('redis:7-alpine');
    expect(published(services.redis)).toContain('6379:6379');
  });

  it('documents REDIS_URL and TEMPORAL_ADDRESS, the variables the service helpers read', () => {
    const read = envNamesReadByServices();
    expect(read).toContain('REDIS_URL');
    expect(read).toContain('TEMPORAL_ADDRESS');
    const env = documentedEnv();
    expect(env.get('REDIS_URL')).toBe('redis://127.0.0.1:6379');
    expect(env.get('TEMPORAL_ADDRESS')).toBe('127.0.0.1:7233');
  });

  it('documents addresses that match the published ports', () => {
    const env = documentedEnv();
    const redisPort = new URL(env.get('REDIS_URL')!).port;
    const temporalPort = env.get('TEMPORAL_ADDRESS')!.split(':').pop();
    expect(published(services.redis).map((p) => p.split(':')[0])).toContain(redisPort);
    expect(published(services.temporal).map((p) => p.split(':')[0])).toContain(temporalPort);
  });
});
