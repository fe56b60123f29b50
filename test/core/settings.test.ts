import { ReplyError } from 'ioredis';
import { FireOnceStoreUnavailable } from '../../src';
import { replyErrorMessage } from '../../src/core/deployment/settings';

// How the start checks read a reply error: a refusal of one command (NOPERM, an unknown command)
// is reported and the next source is tried; credentials Redis refused refuse every command.
describe('replyErrorMessage', () => {
  it.each(['WRONGPASS invalid username-password pair or user is disabled.', 'NOAUTH Authentication required.', 'ERR invalid password'])(
    'credentials refused (%s) are FireOnceStoreUnavailable naming them, Redis 5 wording included',
    (reply) => {
      const refused = new ReplyError(reply);
      let thrown: unknown;
      try {
        replyErrorMessage(refused);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((thrown as Error).message).toBe(`Redis refused this client's credentials (${reply}): check the password or ACL user the client connects with`);
      expect((thrown as Error).cause).toBe(refused);
    },
  );

  it('any other reply error is its message, to report before the next source is tried', () => {
    expect(replyErrorMessage(new ReplyError("NOPERM this user has no permissions to run the 'info' command "))).toBe(
      "NOPERM this user has no permissions to run the 'info' command",
    );
  });

  it('an error that is no reply (a lost connection) is thrown as it is', () => {
    const lost = new Error('Connection is closed.');
    expect(() => replyErrorMessage(lost)).toThrow(lost);
  });
});
