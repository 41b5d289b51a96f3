// Where the harness finds the repository and the built binaries.

import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (tests-e2e/lib/../..). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Scratch space for fixtures and browser profiles (git-ignored). */
export const scratchDir = process.env.LINKFS_E2E_TMP ?? path.join(repoRoot, 'tests-e2e', '.tmp');

/** Screenshots and logs of failed tests (git-ignored). */
export const outDir = path.join(repoRoot, 'tests-e2e', 'out');

/**
 * The directory holding the release binaries: $LINKFS_BIN_DIR, else
 * $CARGO_TARGET_DIR/release, else target/release (what scripts/build produces).
 */
export function binDir(): string {
  if (process.env.LINKFS_BIN_DIR) return path.resolve(process.env.LINKFS_BIN_DIR);
  const target = process.env.CARGO_TARGET_DIR
    ? path.resolve(repoRoot, process.env.CARGO_TARGET_DIR)
    : path.join(repoRoot, 'target');
  return path.join(target, 'release');
}

/** Full path of a built binary; throws a clear error if it is not built. */
export function binary(name: 'linkfs' | 'linkfs-relay' | 'linkfs-gen-tree'): string {
  const p = path.join(binDir(), name);
  if (!existsSync(p)) {
    throw new Error(`${p} does not exist: build it first (bash scripts/build), or point LINKFS_BIN_DIR at it`);
  }
  return p;
}
