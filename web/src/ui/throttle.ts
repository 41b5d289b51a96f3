// Runs an action at most once per interval, always running it once more after the
// last request (so the final state is never missed).

export interface Throttled {
  /** Asks for a run: now if the interval has passed, else at its end. */
  request(): void;
  /** Runs now, cancelling a pending run. */
  flush(): void;
  cancel(): void;
}

export function throttle(action: () => void, intervalMs: number): Throttled {
  let last = -Infinity;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const run = (): void => {
    timer = null;
    last = performance.now();
    action();
  };
  return {
    request() {
      if (timer !== null) return;
      const wait = last + intervalMs - performance.now();
      if (wait <= 0) run();
      else timer = setTimeout(run, wait);
    },
    flush() {
      if (timer !== null) clearTimeout(timer);
      run();
    },
    cancel() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
