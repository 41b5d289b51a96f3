// A small element builder, so that views read as structure rather than as a series
// of createElement/setAttribute calls.

type Child = Node | string | null | undefined | false;

export interface ElementProps {
  className?: string;
  text?: string;
  /** Plain attributes (aria-*, role, title, href, ...). */
  attrs?: Record<string, string>;
  /** data-* attributes, without the `data-` prefix, camelCase as in `dataset`. */
  data?: Record<string, string>;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: ElementProps = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.className !== undefined) node.className = props.className;
  if (props.text !== undefined) node.textContent = props.text;
  if (props.attrs) {
    for (const [name, value] of Object.entries(props.attrs)) node.setAttribute(name, value);
  }
  if (props.data) {
    for (const [name, value] of Object.entries(props.data)) node.dataset[name] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

/** A button that does not submit anything and carries an accessible label. */
export function button(label: string, className: string, onClick: (event: MouseEvent) => void, text?: string): HTMLButtonElement {
  const node = el('button', {
    className,
    text: text ?? label,
    attrs: { type: 'button', 'aria-label': label, title: label },
  });
  node.addEventListener('click', onClick);
  return node;
}
