/** Line icons drawn inline (no icon font, no emoji: both depend on fonts the machine may lack). */
const PATHS = {
  folder:
    "M2 4.5A1.5 1.5 0 0 1 3.5 3h3l1.5 2h4.5A1.5 1.5 0 0 1 14 6.5v5a1.5 1.5 0 0 1-1.5 1.5h-9A1.5 1.5 0 0 1 2 11.5z",
  file: "M4 2h5l3 3v8.5a.5.5 0 0 1-.5.5h-7a.5.5 0 0 1-.5-.5zM9 2v3h3",
  link: "M7 9l2-2M6 5.5l1-1a2.5 2.5 0 0 1 3.5 3.5l-1 1M10 10.5l-1 1A2.5 2.5 0 0 1 5.5 8l1-1",
} as const;

export function Icon({ name }: { name: keyof typeof PATHS }) {
  return (
    <svg class="icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">
      <path d={PATHS[name]} fill="none" stroke="currentColor" stroke-width="1.3" stroke-linejoin="round" />
    </svg>
  );
}
