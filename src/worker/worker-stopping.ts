import type { ActivityInterceptorsFactory, State, Worker } from '@temporalio/worker';

/** How often a running worker's state is read: the longest a waiting local activity goes on after its worker began to shut down. */
const WATCH_MS = 100;

/** The states of a worker that has not begun to shut down. */
const UP: readonly State[] = ['INITIALIZED', 'RUNNING'];

/**
 * Tells each worker's activity interceptor when that worker begins to shut down, so that a local
 * activity waiting in its slot can hand its wait over (`common/hand-off.ts`). The plugin makes
 * the interceptor in `configureWorker`, before the worker exists, and sees the worker only in
 * `runWorker`: it files each interceptor's controller here, and finds it again among the
 * worker's own interceptors. The SDK says nothing when shutdown begins (`worker.shutdown()`, a
 * signal, `runUntil`, a fatal error), so the worker's public state is read every
 * {@link WATCH_MS}: `STOPPING` or later aborts the signal.
 */
export class WorkerStopping {
  private readonly controllers = new WeakMap<ActivityInterceptorsFactory, AbortController>();

  /** Make a worker's activity interceptor with a signal of its own, filed to be found again when the worker runs. */
  interceptor(make: (workerStopping: AbortSignal) => ActivityInterceptorsFactory): ActivityInterceptorsFactory {
    const controller = new AbortController();
    const factory = make(controller.signal);
    this.controllers.set(factory, controller);
    return factory;
  }

  /**
   * Watch `worker` until the returned function is called (as its run ends), which aborts the
   * signal too. A worker whose interceptors do not include one filed here is not watched, nor is
   * a stand-in without the options a `Worker` has (what tests and other plugins may hand to
   * `runWorker`): its activities, if any, wait as they did before 0.9.0.
   */
  watch(worker: Worker): () => void {
    const factories = (worker as Partial<Worker>).options?.interceptors?.activity ?? [];
    const controller = factories.map((f) => this.controllers.get(f)).find((c) => c !== undefined);
    if (controller === undefined) return () => undefined;
    const timer = setInterval(() => {
      if (!UP.includes(worker.getState())) controller.abort();
    }, WATCH_MS);
    timer.unref();
    return () => {
      clearInterval(timer);
      controller.abort();
    };
  }
}
