import { afterEach, describe, expect, it, vi } from 'vitest';
import { main as huntRunnerMain } from '../../src/cli/hunt-runner.js';
import { main as shimMain } from '../../src/cli/shim.js';

/**
 * The entry modules run `main` only when executed: importing them here starts
 * nothing, and their `main` answers in-process with an exit code.
 */
function captured(stream: NodeJS.WriteStream): { text: () => string } {
  const chunks: string[] = [];
  vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  });
  return { text: () => chunks.join('') };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('dfe-hunt-runner main, in-process', () => {
  it('--help is exit 0 and lists every command; no command is exit 2', async () => {
    const out = captured(process.stdout);
    expect(await huntRunnerMain(['--help'])).toBe(0);
    for (const command of ['run', 'materialise', 'due', 'run-now', 'schema', 'enable', 'smoothing plan']) expect(out.text()).toContain(command);
    expect(await huntRunnerMain([])).toBe(2);
  });

  it('an unknown command or smoothing verb is a usage error, exit 2, naming it', async () => {
    const err = captured(process.stderr);
    captured(process.stdout);
    expect(await huntRunnerMain(['launch'])).toBe(2);
    expect(err.text()).toContain('unknown command "launch"');
    expect(await huntRunnerMain(['smoothing', 'shuffle'])).toBe(2);
    expect(err.text()).toContain('smoothing needs one of plan, apply, status, export (got "shuffle")');
    expect(await huntRunnerMain(['run-now'])).toBe(2);
    expect(err.text()).toContain('run-now needs a hunt id');
  });
});

describe('dfe-keda-shim main, in-process', () => {
  it('--help is exit 0; a stray word is exit 2', async () => {
    const out = captured(process.stdout);
    const err = captured(process.stderr);
    expect(await shimMain(['--help'])).toBe(0);
    expect(out.text()).toContain('Usage: dfe-keda-shim');
    expect(await shimMain(['serve'])).toBe(2);
    expect(err.text()).toContain('unknown command serve');
  });
});
