import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { SECOND_NAMESPACE, clusterNodesFromEnv } from '../sample-workflows/services';

/**
 * docker-compose.yml cannot run here (no Docker engine), so this checks what can go stale
 * without anyone noticing: the services, images and published ports, and that the environment
 * variables the service helpers read are documented with values that match those ports. The
 * optional Redis Cluster (profile "cluster") is checked the same way: three cluster nodes that a
 * client on the host reaches at the addresses they announce, and an init job that joins all three.
 */

const root = join(__dirname, '..');
const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');

interface ComposeService {
  image?: string;
  command?: string | string[];
  ports?: (string | number)[];
  profiles?: string[];
  network_mode?: string;
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[] };
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

/** The value after `--flag` in a redis-server command, or undefined. */
function flag(words: string[], name: string): string | undefined {
  const i = words.indexOf(name);
  return i === -1 ? undefined : words[i + 1];
}

/** The services `docker compose up` starts with these profiles (none: the default). */
function startedWith(...profiles: string[]): string[] {
  return Object.entries(services)
    .filter(([, service]) => !service.profiles || service.profiles.some((p) => profiles.includes(p)))
    .map(([name]) => name)
    .sort();
}

const CLUSTER_NODES = ['redis-node-1', 'redis-node-2', 'redis-node-3'];
const CLUSTER_PORTS = ['7001', '7002', '7003'];

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
  it('starts exactly temporal (with its UI) and redis without a profile', () => {
    expect(startedWith()).toEqual(['redis', 'temporal']);
  });

  it('defines nothing but those two and the cluster profile', () => {
    expect(Object.keys(services).sort()).toEqual([...CLUSTER_NODES, 'redis', 'redis-cluster-init', 'temporal'].sort());
    expect(startedWith('cluster')).toEqual([...CLUSTER_NODES, 'redis', 'redis-cluster-init', 'temporal'].sort());
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

  it('creates the second namespace the suites use, since with TEMPORAL_ADDRESS they start no server of their own', () => {
    expect(flag(commandWords(services.temporal), '--namespace')).toBe(SECOND_NAMESPACE);
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

describe('docker-compose.yml, profile "cluster"', () => {
  it.each(CLUSTER_NODES.map((name, i) => [name, CLUSTER_PORTS[i]!]))(
    '%s is a redis:7 cluster node on port %s, with AOF fsynced on every write',
    (name, port) => {
      const node = services[name];
      expect(node?.image).toBe('redis:7');
      expect(node?.profiles).toEqual(['cluster']);
      const words = commandWords(node);
      expect(words[0]).toBe('redis-server');
      expect(flag(words, '--port')).toBe(port);
      expect(flag(words, '--cluster-enabled')).toBe('yes');
      expect(flag(words, '--cluster-config-file')).toBe('nodes.conf');
      expect(flag(words, '--cluster-node-timeout')).toBe('5000');
      expect(flag(words, '--appendonly')).toBe('yes');
      expect(flag(words, '--appendfsync')).toBe('always');
      // It announces the address a client on the host uses: 127.0.0.1 and its own ports.
      expect(flag(words, '--cluster-announce-ip')).toBe('127.0.0.1');
      expect(flag(words, '--cluster-announce-port')).toBe(port);
      expect(flag(words, '--cluster-announce-bus-port')).toBe(String(Number(port) + 10000)); // the default bus port it listens on
      expect(node?.healthcheck?.test).toEqual(['CMD', 'redis-cli', '-p', port, 'ping']);
    },
  );

  it('runs every node and the init job in one network namespace, which publishes every node port on the same host port', () => {
    // 127.0.0.1 is announced to the other nodes too (for the cluster bus), so they must share it.
    const [first, ...rest] = CLUSTER_NODES;
    expect(services[first!]?.network_mode).toBeUndefined();
    for (const name of [...rest, 'redis-cluster-init']) expect(services[name]?.network_mode).toBe(`service:${first}`);
    expect(published(services[first!]).sort()).toEqual(CLUSTER_PORTS.map((p) => `${p}:${p}`));
    const ports = CLUSTER_NODES.map((name) => flag(commandWords(services[name]), '--port'));
    const busPorts = CLUSTER_NODES.map((name) => String(Number(flag(commandWords(services[name]), '--port')) + 10000));
    expect(new Set([...ports, ...busPorts]).size).toBe(6); // no two listeners on one port
  });

  it('joins all three nodes with redis-cli --cluster create once every node is healthy', () => {
    const init = services['redis-cluster-init'];
    expect(init?.image).toBe('redis:7');
    expect(init?.profiles).toEqual(['cluster']);
    expect(init?.depends_on).toEqual(Object.fromEntries(CLUSTER_NODES.map((name) => [name, { condition: 'service_healthy' }])));
    const words = commandWords(init);
    expect(words.slice(0, 2)).toEqual(['sh', '-c']);
    const script = words.slice(2).join(' ');
    // The invocation of sample-workflows/services/cluster.ts, on the announced addresses.
    expect(script).toContain(`redis-cli --cluster create ${CLUSTER_PORTS.map((p) => `127.0.0.1:${p}`).join(' ')} --cluster-replicas 0 --cluster-yes`);
    for (const port of CLUSTER_PORTS) expect(script).toContain(`redis-cli -p ${port} cluster info | grep -q cluster_state:ok`);
    expect(script).not.toContain('$'); // compose would interpolate it
  });

  it('documents REDIS_CLUSTER_NODES, the variable the cluster helper reads, with the published node ports', () => {
    expect(envNamesReadByServices()).toContain('REDIS_CLUSTER_NODES');
    const documented = documentedEnv().get('REDIS_CLUSTER_NODES');
    expect(documented).toBe(CLUSTER_PORTS.map((p) => `127.0.0.1:${p}`).join(','));
    // Parsed the way test/cluster and bench:scale parse it.
    const nodes = clusterNodesFromEnv(documented);
    expect(nodes?.map((n) => `${n.host}:${n.port}`)).toEqual(CLUSTER_PORTS.map((p) => `127.0.0.1:${p}`));
    const hostPorts = published(services['redis-node-1']).map((p) => p.split(':')[0]);
    for (const node of nodes ?? []) expect(hostPorts).toContain(String(node.port));
  });

  it('documents the profile command and the node addresses, in the header and in docs/deployment.md', () => {
    expect(composeText).toMatch(/^#\s+docker compose --profile cluster up -d\s*$/m);
    const guide = readFileSync(join(root, 'docs', 'deployment.md'), 'utf8');
    expect(guide).toMatch(/^docker compose --profile cluster up -d\s*$/m);
    const inGuide = /^export .*\bREDIS_CLUSTER_NODES=(\S+)/m.exec(guide)?.[1];
    expect(inGuide).toBe(documentedEnv().get('REDIS_CLUSTER_NODES'));
  });
});
