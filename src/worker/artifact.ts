import { RawValue, defaultPayloadConverter, type Payload, type PayloadCodec, type PayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { FireOnceCorruptArtifact, type FireOnceErrorContext } from '../core/errors';

const ProtoPayload = temporal.api.common.v1.Payload;

/**
 * How a payload converter's failure is named: by its error class only. The converter's own message
 * quotes the value it failed on, which may be secret and must not reach logs or a workflow's history.
 */
export function converterFailure(err: unknown): string {
  return err instanceof Error ? err.constructor.name : typeof err;
}

/** A payload as the bytes stored in Redis: its protobuf encoding, metadata and data intact. */
export function payloadToBytes(payload: Payload): Buffer {
  const bytes = ProtoPayload.encode(ProtoPayload.create(payload)).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Stored bytes back to a payload; throws {@link FireOnceCorruptArtifact} for anything else. */
function bytesToPayload(bytes: Buffer, context: FireOnceErrorContext): Payload {
  let decoded: temporal.api.common.v1.Payload;
  try {
    decoded = ProtoPayload.decode(bytes);
  } catch (err) {
    throw new FireOnceCorruptArtifact(`stored artifact is not a valid payload: ${(err as Error).message}`, context, { cause: err });
  }
  const encoding = decoded.metadata?.encoding;
  if (encoding === undefined || encoding === null || encoding.length === 0) {
    throw new FireOnceCorruptArtifact('stored artifact is not a valid payload: it has no encoding metadata', context);
  }
  return { metadata: decoded.metadata ?? {}, data: decoded.data ?? new Uint8Array() };
}

/**
 * The bytes to store for a result payload: the worker's payload codecs (e.g. encryption) are
 * applied first, as they are to every payload that leaves the worker, so Redis never holds a
 * result in clear that Temporal would only see encoded.
 */
export async function encodeArtifact(payload: Payload, codecs: readonly PayloadCodec[]): Promise<Buffer> {
  let encoded = [payload];
  for (const codec of codecs) encoded = await codec.encode(encoded);
  return payloadToBytes(encoded[0]);
}

/** The result payload back from stored bytes, codecs undone in reverse order. */
export async function decodeArtifact(bytes: Buffer, codecs: readonly PayloadCodec[], context: FireOnceErrorContext): Promise<Payload> {
  let decoded = [bytesToPayload(bytes, context)];
  try {
    for (const codec of [...codecs].reverse()) decoded = await codec.decode(decoded);
  } catch (err) {
    throw new FireOnceCorruptArtifact(`stored artifact could not be decoded by the payload codec: ${(err as Error).message}`, context, { cause: err });
  }
  return decoded[0];
}

/**
 * The stored result as a fast-forward returns it. A payload converter that cannot read it (say a
 * fleet mid-way through a converter change) gives {@link FireOnceCorruptArtifact}, naming the
 * converter's error class only: its message may quote the stored value.
 */
export function storedResultOf(payload: Payload, converter: PayloadConverter, context: FireOnceErrorContext): unknown {
  try {
    return resultOf(payload, converter);
  } catch (err) {
    throw new FireOnceCorruptArtifact(`stored artifact could not be read by the payload converter (${converterFailure(err)})`, context);
  }
}

/** Converters already probed, and whether each hands a `RawValue`'s payload through untouched. */
const passesRawValues = new WeakMap<PayloadConverter, boolean>();

/**
 * What a guarded activity returns so that the worker sends `payload` as its result. A
 * `CompositePayloadConverter` (the SDK default, and any built from converters with encodings)
 * hands a `RawValue`'s payload through untouched, so the stored bytes go out byte for byte. Any
 * other `PayloadConverter` would serialise the `RawValue` wrapper itself, so it gets the value
 * the payload decodes to, which it converts back to an equal payload.
 */
export function resultOf(payload: Payload, converter: PayloadConverter = defaultPayloadConverter): unknown {
  let passes = passesRawValues.get(converter);
  if (passes === undefined) {
    passes = handsRawValuesThrough(converter);
    passesRawValues.set(converter, passes);
  }
  return passes ? RawValue.fromPayload(payload) : converter.fromPayload(payload);
}

function handsRawValuesThrough(converter: PayloadConverter): boolean {
  const probe = defaultPayloadConverter.toPayload('temporal-fire-once probe');
  try {
    return converter.toPayload(RawValue.fromPayload(probe)) === probe;
  } catch {
    return false;
  }
}
