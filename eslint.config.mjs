// ESLint (flat config): typescript-eslint's recommended rules over src, test, sample-workflows,
// bench, model and scripts. Formatting is Prettier's job (.prettierrc.json), not ESLint's.
import comments from '@eslint-community/eslint-plugin-eslint-comments/configs';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.tmp/', 'bench/out/', 'python/', 'coverage/', '**/*.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  comments.recommended,
  {
    languageOptions: { globals: { ...globals.node, ...globals.jest } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Unused names are already errors in tsconfig (noUnusedLocals, noUnusedParameters); a leading
      // underscore marks a deliberately unused one, as in destructuring that drops a key.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      // Every eslint-disable says why, on the same line: `// eslint-disable-line rule -- reason`.
      '@eslint-community/eslint-comments/require-description': ['error', { ignore: [] }],
      '@eslint-community/eslint-comments/disable-enable-pair': ['error', { allowWholeFile: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
