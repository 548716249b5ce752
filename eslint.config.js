import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The folder table of docs/architecture.md, enforced: each folder of src/ (with
 * its sub-folders) may import only the folders listed for it. The root files
 * (`errors.ts`, `log.ts`, `clock.ts`, `servable.ts`) are for every folder and
 * import only `telemetry/`; `cli/` imports any folder.
 */
const LAYERS = {
  config: [],
  telemetry: ['config'],
  clickhouse: ['config', 'telemetry'],
  schedule: ['clickhouse', 'config', 'telemetry'],
  pressure: ['clickhouse', 'config', 'telemetry'],
  catalogue: ['clickhouse', 'config', 'telemetry'],
  coordination: ['schedule', 'clickhouse', 'config', 'telemetry'],
  smoothing: ['coordination', 'schedule', 'clickhouse', 'config', 'telemetry'],
  runner: ['smoothing', 'coordination', 'schedule', 'clickhouse', 'config', 'telemetry'],
  shim: ['catalogue', 'coordination', 'pressure', 'clickhouse', 'config', 'telemetry'],
  doctor: ['coordination', 'schedule', 'pressure', 'clickhouse', 'config', 'telemetry'],
  demo: ['shim', 'runner', 'catalogue', 'smoothing', 'coordination', 'schedule', 'pressure', 'clickhouse', 'config', 'telemetry'],
};
const FOLDERS = [...Object.keys(LAYERS), 'cli'];
const ROOT_MAY_IMPORT = ['telemetry'];
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
/** cli/ imports any folder, but not chdb. */
const cliRule = {
  files: ['src/cli/**/*.ts'],
  rules: { 'no-restricted-imports': ['error', { patterns: [CHDB] }] },
};
/** The root files import only telemetry/ (and each other). */
const rootRule = {
  files: ['src/*.ts'],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: `^\\./(${FOLDERS.filter((f) => !ROOT_MAY_IMPORT.includes(f)).join('|')})/`,
            message: `the root files of src/ may import only ${ROOT_MAY_IMPORT.join(', ')} (docs/architecture.md)`,
          },
          CHDB,
        ],
      },
    ],
  },
};
/**
 * The pure folders (docs/architecture.md): the files at the top of src/smoothing/
 * and src/schedule/ do no I/O. Types may still come from anywhere they may import.
 */
const PURE_MESSAGE = 'pure code does no I/O: move this to smoothing/store/ or smoothing/control/ (docs/architecture.md)';
const pureRule = {
  files: ['src/smoothing/*.ts', 'src/schedule/**/*.ts'],
  ignores: ['src/schedule/hunt-files.ts'],
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        paths: [{ name: '@clickhouse/client', message: PURE_MESSAGE, allowTypeImports: true }],
        patterns: [
          { regex: '^node:(fs|net|http|https|child_process)', message: PURE_MESSAGE },
          { regex: '^\\./(store|control)/', message: PURE_MESSAGE, allowTypeImports: true },
          { regex: '^\\.\\./coordination/', message: PURE_MESSAGE, allowTypeImports: true },
        ],
      },
    ],
  },
};
/** The claims model is pure (the unit lane runs it): vitest and its own files only, no engine, no I/O. */
const pureClaimsModel = {
  files: ['test/model/claims/**/*.ts'],
  rules: {
    'no-restricted-imports': [
      'error',
      { patterns: [{ regex: '^(?!vitest$|\\./)', message: 'test/model/claims/ is pure: it imports vitest and its own files only' }] },
    ],
  },
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
  cliRule,
  rootRule,
  pureRule,
  pureClaimsModel,
);
