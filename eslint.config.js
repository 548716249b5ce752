import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layering of docs/architecture.md, enforced: each folder of src/ may import
 * only the folders below it. `errors.ts`, `log.ts` and `clock.ts` at the root of
 * src/ are for everyone.
 */
const LAYERS = {
  config: [],
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
const FOLDERS = [...Object.keys(LAYERS), 'cli'];
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
          ],
        },
      ],
    },
  };
});

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.dfe/**', 'charts/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.property.name='only']", message: 'focused tests (.only) silence the rest of the suite' },
      ],
    },
  },
  ...layering,
);
