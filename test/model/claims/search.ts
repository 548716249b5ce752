/**
 * Explicit-state search for the claim models: every state reachable from the
 * initial ones, each visited once (a visited set keyed by the state's canonical
 * text), breadth first so a counterexample is a shortest trace. Pure: no engine,
 * no I/O, no clock.
 */
export interface Step<S> {
  readonly label: string;
  readonly state: S;
}

export interface TransitionSystem<S> {
  readonly initial: S;
  key(state: S): string;
  next(state: S): ReadonlyArray<Step<S>>;
}

export interface Invariant<S> {
  readonly name: string;
  holds(state: S): boolean;
}

export interface Exploration<S> {
  readonly states: number;
  readonly transitions: number;
  /** The first invariant broken, with the shortest trace to it (step labels from the initial state). */
  readonly violation: { readonly invariant: string; readonly trace: readonly string[]; readonly state: S } | undefined;
  /**
   * Bounded liveness (AG EF goal): states from which no path reaches `goal`, among those
   * `mustReach` selects, with a shortest trace to the first one. Computed only without a violation.
   */
  readonly stuck: { readonly count: number; readonly trace: readonly string[]; readonly state: S } | undefined;
  /**
   * The worst case over reachable states of the fewest ticks to the goal on the best schedule:
   * how long the protocol can be kept from the goal by what already happened. Only when nothing is stuck.
   */
  readonly recoveryTicks: number | undefined;
}

export interface SearchOptions<S> {
  readonly invariants: ReadonlyArray<Invariant<S>>;
  readonly goal?: (state: S) => boolean;
  /** Which states must be able to reach the goal (e.g. those far enough from the horizon). */
  readonly mustReach?: (state: S) => boolean;
  /** A safety net, not a scope: the search fails loudly past this many states. */
  readonly maxStates?: number;
  /** Steps that let time pass (one tick each), for `recoveryTicks`. */
  readonly isTick?: (label: string) => boolean;
}

export function explore<S>(system: TransitionSystem<S>, options: SearchOptions<S>): Exploration<S> {
  const maxStates = options.maxStates ?? 2_000_000;
  const ids = new Map<string, number>();
  const states: S[] = [];
  const parent: number[] = [];
  const via: string[] = [];
  const successors: number[][] = [];
  const ticks: boolean[][] = [];
  let transitions = 0;
  const add = (state: S, from: number, label: string): number => {
    const key = system.key(state);
    const known = ids.get(key);
    if (known !== undefined) return known;
    const id = states.length;
    if (id >= maxStates) throw new Error(`state space exceeds ${maxStates} states: shrink the scope`);
    ids.set(key, id);
    states.push(state);
    parent.push(from);
    via.push(label);
    successors.push([]);
    ticks.push([]);
    return id;
  };
  const trace = (id: number): string[] => {
    const labels: string[] = [];
    for (let at = id; at > 0; at = parent[at] ?? 0) labels.push(via[at] ?? '?');
    return labels.reverse();
  };
  add(system.initial, -1, 'start');
  for (let id = 0; id < states.length; id += 1) {
    const state = states[id] as S;
    const broken = options.invariants.find((inv) => !inv.holds(state));
    if (broken) return { states: states.length, transitions, violation: { invariant: broken.name, trace: trace(id), state }, stuck: undefined, recoveryTicks: undefined };
    for (const step of system.next(state)) {
      transitions += 1;
      (successors[id] as number[]).push(add(step.state, id, step.label));
      (ticks[id] as boolean[]).push(options.isTick?.(step.label) ?? false);
    }
  }
  const stuck = stuckStates(states, successors, options, trace);
  const recoveryTicks = stuck === undefined && options.goal && options.isTick ? worstRecovery(states, successors, ticks, options.goal) : undefined;
  return { states: states.length, transitions, violation: undefined, stuck, recoveryTicks };
}

/** 0-1 breadth-first search backwards from the goal states: a tick costs 1, any other step 0. */
function worstRecovery<S>(states: S[], successors: number[][], ticks: boolean[][], goal: (s: S) => boolean): number {
  const predecessors: Array<Array<[number, boolean]>> = states.map(() => []);
  successors.forEach((next, from) => next.forEach((to, k) => predecessors[to]?.push([from, ticks[from]?.[k] ?? false])));
  const dist = new Array<number>(states.length).fill(Number.POSITIVE_INFINITY);
  const deque: number[] = [];
  states.forEach((s, id) => {
    if (goal(s)) {
      dist[id] = 0;
      deque.push(id);
    }
  });
  // A plain array as a deque: zero-cost steps go to the front, ticks to the back.
  let head = 0;
  const front: number[] = [];
  while (front.length > 0 || head < deque.length) {
    const id = front.length > 0 ? (front.pop() as number) : (deque[head++] as number);
    const d = dist[id] as number;
    for (const [from, tick] of predecessors[id] ?? []) {
      const nd = d + (tick ? 1 : 0);
      if (nd < (dist[from] as number)) {
        dist[from] = nd;
        if (tick) deque.push(from);
        else front.push(from);
      }
    }
  }
  return dist.reduce((worst, d) => (Number.isFinite(d) && d > worst ? d : worst), 0);
}

/** States that cannot reach the goal: the complement of backward reachability from the goal states. */
function stuckStates<S>(states: S[], successors: number[][], options: SearchOptions<S>, trace: (id: number) => string[]): Exploration<S>['stuck'] {
  const { goal, mustReach } = options;
  if (!goal) return undefined;
  const predecessors: number[][] = states.map(() => []);
  successors.forEach((next, from) => next.forEach((to) => predecessors[to]?.push(from)));
  const canReach = new Uint8Array(states.length);
  const queue: number[] = [];
  states.forEach((s, id) => {
    if (goal(s)) {
      canReach[id] = 1;
      queue.push(id);
    }
  });
  while (queue.length > 0) {
    const id = queue.pop() as number;
    for (const from of predecessors[id] ?? []) {
      if (canReach[from] === 0) {
        canReach[from] = 1;
        queue.push(from);
      }
    }
  }
  let count = 0;
  let first = -1;
  states.forEach((s, id) => {
    if (canReach[id] === 0 && (mustReach?.(s) ?? true)) {
      count += 1;
      if (first < 0) first = id;
    }
  });
  return count === 0 ? undefined : { count, trace: trace(first), state: states[first] as S };
}
