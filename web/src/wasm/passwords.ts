// A tab share's link passwords, through the password worker (./password-worker.ts):
// `hash` when a link is made, `check` when a visitor guesses. The worker starts with
// the first ask; asks are answered in turn.

export type PasswordAsk = { id: number; op: 'hash'; password: string } | { id: number; op: 'check'; hash: string; attempt: string };
export type PasswordAnswer = { id: number; hash: string } | { id: number; right: boolean } | { id: number; error: string };

export class Passwords {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve(a: PasswordAnswer): void; reject(e: Error): void }>();

  /** The Argon2id hash of `password` (a PHC string) with a fresh salt. */
  async hash(password: string): Promise<string> {
    const a = await this.ask({ id: 0, op: 'hash', password });
    if ('hash' in a) return a.hash;
    throw new Error('error' in a ? a.error : 'the password could not be kept');
  }

  /** Whether `attempt` matches `hash`. */
  async check(hash: string, attempt: string): Promise<boolean> {
    const a = await this.ask({ id: 0, op: 'check', hash, attempt });
    return 'right' in a && a.right;
  }

  private ask(ask: PasswordAsk): Promise<PasswordAnswer> {
    const worker = (this.worker ??= this.start());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.postMessage({ ...ask, id });
    });
  }

  private start(): Worker {
    const worker = new Worker(new URL('./password-worker.ts', import.meta.url), { type: 'module', name: 'linkfs-passwords' });
    worker.onmessage = (event: MessageEvent<PasswordAnswer>) => {
      const w = this.waiting.get(event.data.id);
      this.waiting.delete(event.data.id);
      w?.resolve(event.data);
    };
    worker.onerror = (event) => {
      const why = new Error(`the password checker stopped: ${event.message || 'it could not start'}`);
      for (const w of this.waiting.values()) w.reject(why);
      this.waiting.clear();
      this.worker = null;
    };
    return worker;
  }
}
