import type { Worker } from '@temporalio/worker';
import { Cluster, Redis } from 'ioredis';
import { FireOnceConfigError, FireOncePlugin } from '../../src';
import { checkEvictionPolicy } from '../../src/core';
import type { DoctorReport } from '../../src/cli/doctor/doctor';
import { startRedisCluster, type ClusterNode, type RedisClusterService } from '../../sample-workflows/services';
import { runCli } from '../cli/run-cli';

// The deployment checks on a 3-master cluster of this file's own (one master is made evicting,
// which would refuse the other files' workers on the suite's shared cluster): the eviction
// policy is read from every master, so one evicting master is enough to refuse a worker and the
// CLI, and doctor names it.
describe('deployment checks on a Redis Cluster', () => {
  let service: RedisClusterService;
  let clusterNodes: () => readonly ClusterNode[];
  let cluster: Cluster;
  let evicting: Redis;
  let address: string;
  let url: string;

  beforeAll(async () => {
    service = await startRedisCluster({ own: true });
    clusterNodes = () => service.nodes;
    const [first, second] = service.nodes;
    cluster = new Cluster([...service.nodes]);
    evicting = new Redis({ host: second.host, port: second.port, maxRetriesPerRequest: 1 });
    address = `${second.host}:${second.port}`;
    url = `redis://${first.host}:${first.port}`;
  }, 60_000);

  afterAll(async () => {
    evicting?.disconnect();
    cluster?.disconnect();
    await service?.stop();
  });

  it('reads the policy of every master, and all three are noeviction', async () => {
    const policies = await checkEvictionPolicy(cluster);
    expect(policies.map((p) => [p.address, p.policy, p.safe]).sort()).toEqual(
      clusterNodes()
        .map((n) => [`${n.host}:${n.port}`, 'noeviction', true])
        .sort(),
    );
  });

  it('one master with volatile-lru: the plugin refuses to start, the CLI exits 6 and doctor fails that master only', async () => {
    await evicting.config('SET', 'maxmemory-policy', 'volatile-lru');
    try {
      const err = await new FireOncePlugin({ redis: cluster }).runWorker({} as Worker, async () => undefined).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceConfigError);
      expect((err as Error).message).toMatch(new RegExp(`^Redis at ${address} has maxmemory-policy volatile-lru: `));

      const inspect = await runCli(['inspect', 's', '--redis', url]);
      expect(inspect.code).toBe(6);
      expect(inspect.stderr).toContain(`Redis at ${address} has maxmemory-policy volatile-lru`);

      const doctor = await runCli(['doctor', '--redis', url, '--json']);
      const report = JSON.parse(doctor.stdout) as DoctorReport;
      expect(report).toMatchObject({ topology: 'cluster', exitCode: 1 });
      expect(report.primaries).toHaveLength(3);
      const eviction = report.verdicts.filter((v) => v.check === 'eviction').map((v) => [v.node, v.status]);
      expect(eviction.sort()).toEqual(
        clusterNodes()
          .map((n) => [`${n.host}:${n.port}`, `${n.host}:${n.port}` === address ? 'fail' : 'ok'])
          .sort(),
      );
      expect(report.verdicts.find((v) => v.check === 'cluster')).toMatchObject({
        status: 'ok',
        message: 'all 16384 slots served by 3 master(s), cluster_state:ok',
      });
      expect(doctor.code).toBe(1);
    } finally {
      await evicting.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });
});
