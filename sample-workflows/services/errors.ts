/** A service the demo, tests or benches need could not be found or started. */
export class ServiceUnavailableError extends Error {
  override readonly name = 'ServiceUnavailableError';
}
