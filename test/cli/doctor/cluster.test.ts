import { Redis } from 'ioredis';
import { EXIT } from '../../../src/cli/exit-codes';
import { waitFor } from '../../support/wait';
import { SAFE_ARGS, doctorJson, serverWith, verdictsOf, type ServerWithAdmin } from './support';

// `fire-once doctor` on a Redis Cluster node spawned here, with one slot left unassigned, then
// with every slot assigned: the cluster verdict, and each master's checks.
describe('fire-once doctor on a Redis Cluster', () => {
  let node: ServerWithAdmin;

  beforeAll(async () => {
    node = await serverWith(...SAFE_ARGS, '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf');
  });
  afterAll(() => node?.stop());

  // A master that regains full coverage may wait up to 5 s (its rejoin delay) before it reports
  // cluster_state:ok; on a loaded machine, allow more.
  const waitForState = (admin: Redis, state: string) =>
    waitFor(`cluster_state:${state}`, async () => new RegExp(`cluster_state:${state}`).test(String(await admin.call('CLUSTER', 'INFO'))), { everyMs: 50 });

  it('one slot without a master: the cluster check fails (exit 1); once it is assigned, ok (exit 0)', async () => {
    await node.admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16382');
    const uncovered = await doctorJson(node.server.url);
    expect(uncovered).toMatchObject({ topology: 'cluster', primaries: [`127.0.0.1:${node.server.port}`] });
    expect(verdictsOf(uncovered, 'cluster')).toEqual([
      expect.objectContaining({
        status: 'fail',
        message: expect.stringMatching(/^1 of 16384 slots have no master \(1 master\(s\) serve the rest; cluster_state:fail\)/),
      }),
    ]);
    expect(uncovered.exitCode).toBe(EXIT.atRisk);

    await node.admin.call('CLUSTER', 'ADDSLOTS', '16383');
    await waitForState(node.admin, 'ok');
    const covered = await doctorJson(node.server.url);
    expect(verdictsOf(covered, 'cluster')).toEqual([
      expect.objectContaining({ status: 'ok', message: 'all 16384 slots served by 1 master(s), cluster_state:ok' }),
    ]);
    expect(covered.verdicts.filter((v) => v.status !== 'ok').map((v) => `${v.check}: ${v.message}`)).toEqual([
      expect.stringMatching(/^prefixes: no key under --prefix fire-once/),
    ]);
    expect(covered.exitCode).toBe(EXIT.ok);
  });
});
