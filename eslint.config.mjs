// Lint rules for the TypeScript sources (issue 31 item 8; docs/decisions/0233).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'build/**', 'node_modules/**', 'prebuilds/**', 'native/**', 'bench/.work/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      // A job process is signalled only through the verified native path (DEVELOPERS.md 5).
      'no-restricted-properties': ['error', { object: 'process', property: 'kill', message: 'signal a job through lib/process (a verified handle), never by a bare PID' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // The peer baselines of these benchmarks signal by bare PID on purpose (DEVELOPERS.md 5).
    files: ['bench/signal-latency.ts', 'bench/stop-safety.ts', 'bench/stop-tree.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);
