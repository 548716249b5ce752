import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DfeError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { compileHuntFile, type HuntFileResult, type HuntSpec } from './hunt-spec.js';

/**
 * Reads every `*.yaml` in the hunts directory (docs/hunts.md). A bad file is skipped
 * with a warning naming the file, key and reason, and reported to the caller so
 * it can count it; the other hunts still load. Only a missing or unreadable
 * directory is an error, so a reload can keep the hunts it had.
 */
export interface HuntSet {
  readonly dir: string;
  readonly hunts: readonly HuntSpec[];
  readonly invalid: readonly Extract<HuntFileResult, { kind: 'invalid' }>[];
  readonly skipped: readonly Extract<HuntFileResult, { kind: 'skipped' }>[];
  /** Names, sizes and mtimes of the files, to notice a change cheaply. */
  readonly signature: string;
}

function yamlFiles(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((name) => name.endsWith('.yaml'))
      .sort();
  } catch (err) {
    throw new DfeError('CONFIG_INVALID', `cannot read the hunts directory ${dir} (${describeError(err)})`, {
      key: 'DFE_HUNTS_DIR',
      value: dir,
      cause: err,
    });
  }
}

/** Cheap fingerprint of the directory; stat follows a ConfigMap's symlink swap. */
export function huntsDirSignature(dir: string): string {
  return yamlFiles(dir)
    .map((name) => {
      try {
        const st = statSync(join(dir, name));
        return `${name}:${st.size}:${st.mtimeMs}`;
      } catch {
        return `${name}:gone`;
      }
    })
    .join('|');
}

export function loadHuntsDir(dir: string, spreadFraction: number): HuntSet {
  const signature = huntsDirSignature(dir);
  const hunts: HuntSpec[] = [];
  const invalid: Extract<HuntFileResult, { kind: 'invalid' }>[] = [];
  const skipped: Extract<HuntFileResult, { kind: 'skipped' }>[] = [];
  for (const name of yamlFiles(dir)) {
    const file = join(dir, name);
    let result: HuntFileResult;
    try {
      result = compileHuntFile(file, readFileSync(file, 'utf8'), spreadFraction);
    } catch (err) {
      result = { kind: 'invalid', file, key: 'file', reason: `cannot be read (${describeError(err)})` };
    }
    if (result.kind === 'hunt') hunts.push(result.spec);
    else if (result.kind === 'skipped') skipped.push(result);
    else invalid.push(result);
  }
  return { dir, hunts, invalid, skipped, signature };
}

/** One warning per bad file and one info line per skipped mode. */
export function logHuntSet(log: Logger, set: HuntSet): void {
  for (const bad of set.invalid) {
    log.warn({ file: bad.file, key: bad.key }, `hunt file ${bad.file} skipped: ${bad.key} ${bad.reason}`);
  }
  for (const skip of set.skipped) log.info({ file: skip.file }, `hunt file ${skip.file} skipped: ${skip.reason}`);
  log.info({ dir: set.dir, hunts: set.hunts.length, invalid: set.invalid.length, skipped: set.skipped.length }, 'hunts loaded');
}
