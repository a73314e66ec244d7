// Reading on after a caller left (ADR 1305) holds an upstream connection for up to READ_AFTER_LEAVING_MS. A
// client that opens hundreds of streams and hangs up at the headers would hold the whole upstream pool that
// long, and every other caller would wait for a connection. So the reads are bounded, per caller and in all:
// a call past either bound stops reading at once, frees its connection and is charged the estimate, as one whose
// usage never came (ADR 1305, addendum).

/** Calls reading on after their callers left, in all: a quarter of an upstream's default pool of 256. */
export const MAX_LEAVING_READS = 64;
/** Of those, for one caller (its user id, else its address). */
export const MAX_LEAVING_READS_PER_CALLER = 8;

export class LeavingReads {
  readonly #total: number;
  readonly #perCaller: number;
  readonly #byCaller = new Map<string, number>();
  #inUse = 0;
  /** Calls that stopped reading at once because a bound was reached, since start. */
  refused = 0;

  constructor(total = MAX_LEAVING_READS, perCaller = MAX_LEAVING_READS_PER_CALLER) {
    this.#total = total;
    this.#perCaller = perCaller;
  }

  get inUse(): number {
    return this.#inUse;
  }

  /** A slot for `caller`'s read, and the function that gives it back; or why there is none. */
  take(caller: string): { release: () => void } | { refusal: string } {
    const held = this.#byCaller.get(caller) ?? 0;
    if (held >= this.#perCaller || this.#inUse >= this.#total) {
      this.refused++;
      return {
        refusal:
          held >= this.#perCaller
            ? `this caller already has ${held} calls read on after it left (at most ${this.#perCaller})`
            : `${this.#inUse} calls already read on after their callers left (at most ${this.#total})`,
      };
    }
    this.#byCaller.set(caller, held + 1);
    this.#inUse++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#inUse--;
        const left = (this.#byCaller.get(caller) ?? 1) - 1;
        if (left === 0) this.#byCaller.delete(caller);
        else this.#byCaller.set(caller, left);
      },
    };
  }
}

/** The process's one set of bounds: the upstream pools they protect are the process's too. */
export const LEAVING_READS = new LeavingReads();
