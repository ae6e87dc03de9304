/**
 * Disk bindings kept in this process's memory (the demo, the benchmarks, tests, and a join service
 * started without a Kubernetes record). Lost on restart and not shared between replicas, so
 * production uses the Kubernetes-backed record (src/adapters/kubernetes/disk-bindings.ts).
 */
import type { DiskBinding, DiskBindings } from '../../ports/disk-bindings.js';

/** {@link DiskBindings} in a Map; first writer wins. */
export class InMemoryDiskBindings implements DiskBindings {
  private readonly bindings = new Map<string, DiskBinding>();

  /** {@inheritDoc DiskBindings.bind} */
  async bind(binding: DiskBinding): Promise<DiskBinding> {
    const key = binding.diskUuid.toLowerCase();
    const existing = this.bindings.get(key);
    if (existing !== undefined) return { ...existing };
    const stored = { ...binding, diskUuid: key };
    this.bindings.set(key, stored);
    return { ...stored };
  }

  /** {@inheritDoc DiskBindings.releaseOthers} */
  async releaseOthers(owners: readonly string[], keep: string): Promise<DiskBinding[]> {
    const kept = keep.toLowerCase();
    const released: DiskBinding[] = [];
    for (const [uuid, binding] of this.bindings) {
      if (uuid === kept || !owners.includes(binding.owner)) continue;
      this.bindings.delete(uuid);
      released.push({ ...binding });
    }
    return released;
  }

  /** Releases a disk (an operator's decision, e.g. after replacing its node). */
  release(diskUuid: string): boolean {
    return this.bindings.delete(diskUuid.toLowerCase());
  }

  /** Number of bound disks. */
  get size(): number {
    return this.bindings.size;
  }
}
