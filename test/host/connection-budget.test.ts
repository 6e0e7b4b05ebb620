import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  connectionBudgetSize,
  createConnectionBudget,
  descriptorLimit,
} from '../../server/connection-budget.ts';

const dir = mkdtempSync(join(tmpdir(), 'synchost-budget-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Step =
  | { kind: 'take'; address: number }
  | { kind: 'release'; pick: number }
  | { kind: 'release-twice'; pick: number };

const steps = fc.array(
  fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('take' as const), address: fc.nat(5) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('release-twice' as const), pick: fc.nat() }),
    },
  ),
  { maxLength: 120 },
);

/**
 * The model: the holders in the order they were taken, and for each address when its count
 * last changed. When full, the victim is the oldest holder of the address with the highest
 * count, among those the one whose count changed first.
 */
class Model {
  held: Array<{ id: number; address: string }> = [];
  changedAt = new Map<string, number>();
  clock = 0;
  evicted: number[] = [];

  count(address: string): number {
    return this.held.filter((h) => h.address === address).length;
  }

  touch(address: string): void {
    this.changedAt.set(address, this.clock++);
  }

  victim(): { id: number; address: string } {
    const addresses = [...new Set(this.held.map((h) => h.address))];
    const most = Math.max(...addresses.map((a) => this.count(a)));
    const address = addresses
      .filter((a) => this.count(a) === most)
      .sort((a, b) => (this.changedAt.get(a) ?? 0) - (this.changedAt.get(b) ?? 0))[0];
    return this.held.find((h) => h.address === address) as { id: number; address: string };
  }

  remove(id: number): void {
    const found = this.held.find((h) => h.id === id);
    if (found === undefined) return;
    this.held = this.held.filter((h) => h.id !== id);
    this.touch(found.address);
  }
}

describe('the budget of untrusted connections', () => {
  it('takes every connection, holds at most its size, and evicts as the model says', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), steps, (size, plan: Step[]) => {
        const budget = createConnectionBudget(size);
        const model = new Model();
        const holders = new Map<number, object>();
        const evictedIds: number[] = [];
        let next = 0;
        for (const step of plan) {
          if (step.kind === 'take') {
            const id = next++;
            const address = `a${step.address}`;
            const holder = { id };
            holders.set(id, holder);
            if (model.held.length >= size) {
              const victim = model.victim();
              model.remove(victim.id);
              model.evicted.push(victim.id);
            }
            budget.take(address, holder, () => evictedIds.push(id));
            model.held.push({ id, address });
            model.touch(address);
          } else if (model.held.length > 0) {
            const { id } = model.held[step.pick % model.held.length] as { id: number };
            budget.release(holders.get(id) as object);
            if (step.kind === 'release-twice') budget.release(holders.get(id) as object);
            model.remove(id);
          } else {
            // releasing what it does not hold changes nothing
            budget.release({});
          }
          expect(evictedIds).toEqual(model.evicted);
          expect(budget.held).toBe(model.held.length);
          expect(budget.held).toBeLessThanOrEqual(size);
          expect(budget.evicted).toBe(model.evicted.length);
        }
        // an evicted holder released later (its close) changes nothing
        for (const id of evictedIds) budget.release(holders.get(id) as object);
        expect(budget.held).toBe(model.held.length);
      }),
      { numRuns: 300 },
    );
  });

  it('taking a holder it already holds changes nothing', () => {
    const budget = createConnectionBudget(2);
    const holder = {};
    budget.take('a', holder, () => {});
    budget.take('a', holder, () => {});
    expect(budget.held).toBe(1);
  });
});

describe('its size', () => {
  it('is half the soft limit on open files, 512 where it cannot be read', () => {
    const limits = join(dir, 'limits');
    writeFileSync(
      limits,
      [
        'Limit                     Soft Limit           Hard Limit           Units     ',
        'Max cpu time              unlimited            unlimited            seconds   ',
        'Max open files            400                  4096                 files     ',
        'Max locked memory         8388608              8388608              bytes     ',
      ].join('\n'),
    );
    expect(descriptorLimit(limits)).toBe(400);
    expect(connectionBudgetSize(descriptorLimit(limits))).toBe(200);
    expect(connectionBudgetSize(65_536)).toBe(32_768);
    expect(descriptorLimit(join(dir, 'missing'))).toBeUndefined();
    expect(connectionBudgetSize(undefined)).toBe(512);
    writeFileSync(
      limits,
      'Max open files            unlimited            unlimited            files\n',
    );
    expect(connectionBudgetSize(descriptorLimit(limits))).toBe(512);
    // this process's own, as the host reads it at start
    expect(descriptorLimit()).toBeGreaterThan(0);
  });
});
