import { defaultPayloadConverter, type DataConverter, type PayloadCodec, type PayloadConverter } from '@temporalio/common';
import { FireOnceConfigError } from '../core/errors';

/** The worker's payload converter and codecs, as the worker itself will use them. */
export interface WorkerConverter {
  readonly payloadConverter: PayloadConverter;
  readonly payloadCodecs: readonly PayloadCodec[];
}

/**
 * Load the payload converter and codecs of a worker's `dataConverter`, by its public fields: the
 * `payloadConverter` export of `payloadConverterPath` (the SDK default without one) and
 * `payloadCodecs`. Guarded results are stored and returned through exactly these.
 */
export function loadWorkerConverter(dataConverter: DataConverter | undefined): WorkerConverter {
  const path = dataConverter?.payloadConverterPath;
  const payloadCodecs = dataConverter?.payloadCodecs ?? [];
  if (path === undefined) return { payloadConverter: defaultPayloadConverter, payloadCodecs };
  const exported = (require(path) as { payloadConverter?: unknown }).payloadConverter; // eslint-disable-line @typescript-eslint/no-require-imports -- the SDK loads it the same way
  const usable =
    typeof exported === 'object' &&
    exported !== null &&
    ['toPayload', 'fromPayload'].every((m) => typeof (exported as Record<string, unknown>)[m] === 'function');
  if (!usable) throw new FireOnceConfigError(`payloadConverterPath ${path} must export a payloadConverter with toPayload and fromPayload`);
  return { payloadConverter: exported as PayloadConverter, payloadCodecs };
}
