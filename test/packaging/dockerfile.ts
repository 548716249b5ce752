/**
 * Reads the runtime stage of the repository's Dockerfile, so the production-install test
 * replays the image's own steps (its COPYs, its `npm install`, its ENV) instead of a copy of
 * them that could drift. Only the instructions the Dockerfile uses are understood; anything
 * else in the runtime stage is an error, so a new step cannot be silently ignored.
 */
import { readFileSync } from 'node:fs';

export interface CopyStep {
  readonly kind: 'copy';
  /** Set for `COPY --from=<stage>`. */
  readonly fromStage: string | undefined;
  readonly sources: readonly string[];
  /** Absolute, resolved against WORKDIR. */
  readonly destination: string;
}

export interface RunStep {
  readonly kind: 'run';
  readonly command: string;
}

export interface RuntimeStage {
  readonly baseImage: string;
  readonly workdir: string;
  readonly steps: readonly (CopyStep | RunStep)[];
  readonly env: Readonly<Record<string, string>>;
  readonly user: string | undefined;
  readonly entrypoint: readonly string[];
  readonly cmd: readonly string[];
}

/** Instructions, with `\` continuations joined and comments dropped. */
function instructions(text: string): string[] {
  const out: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    out.push((pending + line).trim());
    pending = '';
  }
  return out;
}

const join = (base: string, path: string) => (path.startsWith('/') ? path : `${base.replace(/\/$/, '')}/${path.replace(/^\.\/?/, '')}`);

export function parseRuntimeStage(path: string, stageName = 'runtime'): RuntimeStage {
  const all = instructions(readFileSync(path, 'utf8'));
  const args = new Map<string, string>();
  for (const line of all) {
    const arg = /^ARG (\w+)=(\S+)$/.exec(line);
    if (arg) args.set(arg[1]!, arg[2]!);
  }
  const expand = (s: string) => s.replace(/\$\{(\w+)\}/g, (_, name: string) => args.get(name) ?? '');
  const start = all.findIndex((line) => new RegExp(`^FROM \\S+ AS ${stageName}$`, 'i').test(line));
  if (start < 0) throw new Error(`${path}: no stage "${stageName}"`);
  const baseImage = expand(all[start]!.split(/\s+/)[1]!);
  let workdir = '/';
  let user: string | undefined;
  let entrypoint: string[] = [];
  let cmd: string[] = [];
  const env: Record<string, string> = {};
  const steps: (CopyStep | RunStep)[] = [];
  for (const line of all.slice(start + 1)) {
    const [instruction, ...rest] = line.split(/\s+/);
    const body = line.slice(instruction!.length).trim();
    switch (instruction!.toUpperCase()) {
      case 'WORKDIR':
        workdir = join(workdir, body);
        break;
      case 'COPY': {
        const from = rest[0]?.startsWith('--from=') ? rest.shift()!.slice('--from='.length) : undefined;
        const destination = join(workdir, rest.pop()!);
        steps.push({ kind: 'copy', fromStage: from, sources: rest, destination });
        break;
      }
      case 'RUN':
        steps.push({ kind: 'run', command: body });
        break;
      case 'ENV':
        for (const match of body.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[match[1]!] = match[2]!.replace(/^"|"$/g, '');
        break;
      case 'USER':
        user = body;
        break;
      case 'ENTRYPOINT':
        entrypoint = JSON.parse(body) as string[];
        break;
      case 'CMD':
        cmd = JSON.parse(body) as string[];
        break;
      case 'EXPOSE':
        break;
      default:
        throw new Error(`${path}: the runtime stage has "${instruction}", which the packaging test does not replay`);
    }
  }
  return { baseImage, workdir, steps, env, user, entrypoint, cmd };
}
