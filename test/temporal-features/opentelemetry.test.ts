import { context as otelContext, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { SimplePlugin } from '@temporalio/plugin';
import { Worker, type ActivityInterceptorsFactory, type WorkerOptions } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { guardedActivities } from './fixtures/activities';
import { newScope, oneResult, useFeatures } from '../support/features';

/** OpenTelemetry's workflow interceptors (inbound, outbound, internals), as a module for `workflowModules`. */
const otelWorkflowModule = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** Where OpenTelemetry's interceptors go on the worker, relative to the plugin's. */
type Order = 'OpenTelemetry outside' | 'fire-once outside';

/**
 * The StartActivity spans (one per run, from the workflow's exporter sink) and the RunActivity
 * spans: how many of these are children of a StartActivity span (same trace, its span ID as
 * parent), and of how many distinct ones.
 */
function activitySpans(spans: readonly ReadableSpan[]) {
  const starts = spans.filter((s) => s.name === 'StartActivity:dispatchJob').map((s) => s.spanContext());
  const runs = spans.filter((s) => s.name === 'RunActivity:dispatchJob');
  const parents = runs.flatMap((run) => starts.filter((s) => s.spanId === run.parentSpanId && s.traceId === run.spanContext().traceId));
  return { starts: starts.length, runs: runs.length, childrenOfAStart: parents.length, distinctParents: new Set(parents.map((s) => s.spanId)).size };
}

// OpenTelemetry's interceptors (not its plugin) beside the FireOncePlugin. Both carry a header from
// the workflow to the activity, OpenTelemetry's `_tracer-data` and the plugin's scope: each side
// must pass the other's on, in either order. Interceptors in WorkerOptions come before the
// plugin's, which it appends: OpenTelemetry outside. Given by a plugin listed after it, they come
// after: fire-once outside.
describe('Temporal features: OpenTelemetry interceptors beside the plugin', () => {
  const { harness, context } = useFeatures('otel');
  const exporter = new InMemorySpanExporter();
  const spanProcessor = new SimpleSpanProcessor(exporter);
  const resource = new Resource({ 'service.name': 'fire-once-otel-features' });
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  const tracer = provider.getTracer('fire-once-otel-features');
  const otelActivity: ActivityInterceptorsFactory = (ctx) => ({
    inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
    outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
  });

  // OpenTelemetry's activity interceptor reads its header through the global propagator (W3C
  // trace context, which register() installs) into the active context: the worker process needs
  // both, as an application's tracing setup gives it. The workflow sandbox sets up its own.
  beforeAll(() => provider.register({ contextManager: new AsyncLocalStorageContextManager() }));
  afterAll(() => {
    trace.disable();
    propagation.disable();
    otelContext.disable();
  });
  beforeEach(() => exporter.reset());

  /** The worker options for `order`: OpenTelemetry's interceptors before the plugin's, or after them. */
  function wiring(order: Order, plugin: FireOncePlugin): Partial<WorkerOptions> {
    const sinks = { exporter: makeWorkflowExporter(spanProcessor, resource) };
    if (order === 'OpenTelemetry outside') {
      return { sinks, interceptors: { workflowModules: [otelWorkflowModule], activity: [otelActivity] }, plugins: [plugin] };
    }
    const otelAfter = new SimplePlugin({
      name: 'otel-after-fire-once',
      workerInterceptors: { workflowModules: [otelWorkflowModule], activity: [otelActivity] },
    });
    return { sinks, plugins: [plugin, otelAfter] };
  }

  /** 4 runs of one scope at once, then a later one, on a worker wired in `order`; `runSpans`: how many RunActivity spans to expect. */
  async function fiveRuns(order: Order, runSpans: number): Promise<void> {
    const { ctx, base } = context();
    const plugin = new FireOncePlugin({ redis: harness.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowsPath: require.resolve('./fixtures/workflows'),
      activities: guardedActivities(harness.redis, ctx.prefix),
      ...wiring(order, plugin),
    });
    const scope = newScope('otel');

    const results = await worker.runUntil(async () => {
      const concurrent = await Promise.all([0, 1, 2, 3].map(() => ctx.start('dispatchRun', [scope, 500])));
      const all = await Promise.all(concurrent.map((h) => h.result()));
      return [...all, await (await ctx.start('dispatchRun', [scope, 500])).result()];
    });
    await provider.forceFlush();

    // The scope reached the guarded job through OpenTelemetry's interceptors: one dispatch for all 5.
    oneResult(results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
    // OpenTelemetry's header reached the activity too: every RunActivity span has its run's
    // StartActivity span as parent. With OpenTelemetry outside, each of the 5 attempts is traced;
    // with fire-once outside, only the one that dispatched reaches OpenTelemetry's interceptor
    // (the waiters and the fast-forward end in the guard).
    expect(activitySpans(exporter.getFinishedSpans())).toEqual({ starts: 5, runs: runSpans, childrenOfAStart: runSpans, distinctParents: runSpans });
  }

  it("OpenTelemetry outside: 4 runs at once and a later one share one dispatch; each of the 5 attempts has a RunActivity span, the child of its run's StartActivity span", () =>
    fiveRuns('OpenTelemetry outside', 5));

  it("fire-once outside: 4 runs at once and a later one share one dispatch; only the dispatching attempt has a RunActivity span, the child of its run's StartActivity span", () =>
    fiveRuns('fire-once outside', 1));
});
