import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layering of docs/architecture.md, enforced: each folder of src/ may import
 * only the folders below it. `errors.ts`, `log.ts` and `clock.ts` at the root of
 * src/ are for everyone.
 */
const LAYERS = {
  config: [],
  telemetry: ['config'],
  clickhouse: ['config'],
  schedule: ['clickhouse', 'config'],
  pressure: ['clickhouse', 'config'],
  catalogue: ['clickhouse', 'config'],
  coordination: ['schedule', 'clickhouse', 'config'],
  smoothing: ['schedule', 'clickhouse', 'config'],
  runner: ['coordination', 'smoothing', 'schedule', 'clickhouse', 'config'],
  shim: ['catalogue', 'coordination', 'smoothing', 'pressure', 'clickhouse', 'config'],
  demo: ['shim', 'runner', 'catalogue', 'coordination', 'smoothing', 'schedule', 'pressure', 'clickhouse', 'config'],
};
/** Tracing (src/telemetry/, below config only) is for every layer above config, like log.ts. */
for (const [folder, allowed] of Object.entries(LAYERS)) if (folder !== 'config' && folder !== 'telemetry') allowed.push('telemetry');
const FOLDERS = [...Object.keys(LAYERS), 'cli'];
/**
 * The embedded engine (npm chdb, a devDependency the image never ships) is
 * src/clickhouse/'s business alone: it is the one seam between a server and
 * the engine (docs/embedded.md). A flat config's later rule replaces an earlier
 * one, so this pattern rides along in every folder's rule below.
 */
const CHDB = { regex: '^chdb(/|$)', message: 'only src/clickhouse/ may import chdb: ask the ClickHouseHandle instead (docs/embedded.md)' };
const layering = Object.entries(LAYERS).map(([folder, allowed]) => {
  const forbidden = FOLDERS.filter((f) => f !== folder && !allowed.includes(f));
  return {
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^(\\.\\./)+(${forbidden.join('|')})/`,
              message: `src/${folder}/ may import only ${allowed.length ? allowed.join(', ') : 'nothing else in src/'} (docs/architecture.md)`,
            },
            ...(folder === 'clickhouse' ? [] : [CHDB]),
          ],
        },
      ],
    },
  };
});
const NO_ONLY = { selector: "CallExpression[callee.property.name='only']", message: 'focused tests (.only) silence the rest of the suite' };
/** The same for `import('chdb…')`, which no-restricted-imports does not see. */
const NO_DYNAMIC_CHDB = { selector: 'ImportExpression[source.value=/^chdb(\\/|$)/]', message: CHDB.message };
/** cli/ and the root files (errors, log, clock) import any folder, but not chdb. */
const noChdbElsewhere = {
  files: ['src/cli/**/*.ts', 'src/*.ts'],
  rules: { 'no-restricted-imports': ['error', { patterns: [CHDB] }] },
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.dfe/**', 'charts/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', NO_ONLY],
    },
  },
  { files: ['src/**/*.ts'], ignores: ['src/clickhouse/**'], rules: { 'no-restricted-syntax': ['error', NO_ONLY, NO_DYNAMIC_CHDB] } },
  ...layering,
  noChdbElsewhere,
);
