/** Attributes and listeners of an element built with `h`. */
export type Props = Record<
  string,
  string | number | boolean | undefined | ((event: Event) => void)
>;
export type Child = Node | string | number | null | undefined | false;

/**
 * Creates an element: `on*` props become listeners, booleans toggle attributes, the rest are
 * attributes. Text is always set as text, never parsed as HTML.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(key.slice(2).toLowerCase(), value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** The element with this id; throws when the page is not the admin page. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing from the page`);
  return el as T;
}

/**
 * Replaces the content of `container`, keeping keyboard focus on the element with the same
 * `data-key` when the focused element was inside it.
 */
export function replaceKeepingFocus(container: Element, content: Node): void {
  const active = document.activeElement;
  const key =
    active instanceof HTMLElement && container.contains(active) ? active.dataset.key : undefined;
  container.replaceChildren(content);
  if (key !== undefined) {
    const again = container.querySelector<HTMLElement>(`[data-key="${CSS.escape(key)}"]`);
    again?.focus();
  }
}

/** Copies text to the clipboard; falls back to a selection copy on plain-http pages. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = h('textarea', { readonly: true, 'aria-hidden': 'true' });
    area.value = text;
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.append(area);
    area.select();
    const ok = document.execCommand('copy');
    area.remove();
    return ok;
  }
}
