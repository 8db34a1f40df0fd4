import { useEffect, useState } from "preact/hooks";

/**
 * State that views re-render from. Changes are announced at most once per animation frame, so a
 * stream of thousands of chunks costs one render per frame, not one per chunk.
 */
export class Observable {
  private readonly listeners = new Set<() => void>();
  private scheduled = false;

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  protected changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      for (const listener of [...this.listeners]) listener();
    });
  }
}

/** Re-renders the calling component whenever `model` changes. */
export function useObservable(model: Observable | undefined): void {
  const [, setTick] = useState(0);
  useEffect(() => model?.subscribe(() => setTick((n) => n + 1)), [model]);
}
