import { Redis } from 'ioredis';
import { compareVersions } from '../../../src/core/deployment/version';
import { connectRedis } from '../../support/redis';
import { doctorJson, verdictsOf } from './support';

// The ACL verdicts of `doctor` against the suite's Redis, whatever its version:
// `npm run test:redis5` runs this file against Redis 5.0, and it was run by hand against 6.2.
// 7.0 and later can check a user's permissions without running anything (redis.acl_check_cmd,
// ACL DRYRUN); 6.x has ACL users but neither way to ask; 5.0 has no ACL at all, so every client
// may run every command.
describe("fire-once doctor's ACL verdicts on the suite's Redis, by its version", () => {
  let redis: Redis;
  let version: string;
  beforeAll(async () => {
    redis = connectRedis();
    version = /^redis_version:(\S+)/m.exec(await redis.info('server'))![1];
  });
  afterAll(() => redis.disconnect());

  it('as the connected user: ok on 7.0 and later and on 5.x (no ACL there), unknown on 6.x with the reason and a way to check by hand', async () => {
    const report = await doctorJson(process.env.REDIS_URL!, ['--prefix', 'acl-version']);
    const acl = [...verdictsOf(report, 'acl-worker'), ...verdictsOf(report, 'acl-cli')];
    expect(acl).toHaveLength(2);
    if (compareVersions(version, '7.0.0') >= 0) {
      expect(acl.map((v) => v.status)).toEqual(['ok', 'ok']);
    } else if (compareVersions(version, '6.0.0') >= 0) {
      for (const v of acl) {
        expect(v).toMatchObject({
          status: 'unknown',
          message: `the permissions of user default could not be checked: that needs Redis 7.0 (redis.acl_check_cmd, ACL DRYRUN), and this is ${version}`,
          fix: expect.stringMatching(/^compare ACL GETUSER default with docs\/reliability\.md's least-privilege line/),
        });
      }
    } else {
      for (const v of acl) {
        expect(v).toMatchObject({
          status: 'ok',
          message: expect.stringMatching(new RegExp(`^Redis ${version.replace(/\./g, '\\.')} has no ACL: every client may run every command`)),
        });
      }
    }
  });

  it('with --acl-user: checked on 7.0 and later; on older servers unknown, saying why', async () => {
    const report = await doctorJson(process.env.REDIS_URL!, ['--prefix', 'acl-version', '--acl-user', 'default']);
    const acl = [...verdictsOf(report, 'acl-worker'), ...verdictsOf(report, 'acl-cli')];
    if (compareVersions(version, '7.0.0') >= 0) {
      expect(acl.map((v) => v.status)).toEqual(['ok', 'ok']);
    } else {
      const why =
        compareVersions(version, '6.0.0') >= 0
          ? `that needs Redis 7.0 (redis.acl_check_cmd, ACL DRYRUN), and this is ${version}`
          : `Redis ${version} has no ACL users (they came with 6.0)`;
      expect(acl.map((v) => [v.status, v.message])).toEqual([
        ['unknown', `the permissions of user default could not be checked: ${why}`],
        ['unknown', `the permissions of user default could not be checked: ${why}`],
      ]);
    }
  });
});
