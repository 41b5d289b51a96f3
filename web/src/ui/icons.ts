// Line icons for entry kinds and actions, drawn as inline SVG (no icon font, no
// network). Each icon is built once and cloned.

const SVG_NS = 'http://www.w3.org/2000/svg';

const PATHS = {
  folder: 'M3 6.5A1.5 1.5 0 0 1 4.5 5h4l2 2h9A1.5 1.5 0 0 1 21 8.5v9a1.5 1.5 0 0 1-1.5 1.5h-15A1.5 1.5 0 0 1 3 17.5z',
  file: 'M6 3h8l4 4v14H6z M14 3v4h4',
  text: 'M6 3h8l4 4v14H6z M14 3v4h4 M9 12h6 M9 15h6 M9 18h4',
  image: 'M4 5h16v14H4z M4 16l5-5 4 4 3-3 4 4 M15.5 9.5a1 1 0 1 0 0.01 0',
  link: 'M10 14a4 4 0 0 0 5.7 0l3-3a4 4 0 0 0-5.7-5.7l-1 1 M14 10a4 4 0 0 0-5.7 0l-3 3a4 4 0 0 0 5.7 5.7l1-1',
  download: 'M12 4v11 M7 10l5 5 5-5 M5 20h14',
  close: 'M6 6l12 12 M18 6L6 18',
  up: 'M12 19V5 M6 11l6-6 6 6',
  search: 'M11 4a7 7 0 1 0 0.01 0 M20 20l-4-4',
  grid: 'M4 4h7v7H4z M13 4h7v7h-7z M4 13h7v7H4z M13 13h7v7h-7z',
  list: 'M4 6h16 M4 12h16 M4 18h16',
  previous: 'M15 5l-7 7 7 7',
  next: 'M9 5l7 7-7 7',
  video: 'M4 6h11v12H4z M15 10l5-3v10l-5-3',
} as const;

export type IconName = keyof typeof PATHS;

const built = new Map<IconName, SVGSVGElement>();

/** A 24x24 stroked icon, hidden from assistive technology (its context names it). */
export function icon(name: IconName, className = 'icon'): SVGSVGElement {
  let svg = built.get(name);
  if (!svg) {
    svg = document.createElementNS(SVG_NS, 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('focusable', 'false');
    const path = document.createElementNS(SVG_NS, 'path');
    path.setAttribute('d', PATHS[name]);
    svg.append(path);
    built.set(name, svg);
  }
  const copy = svg.cloneNode(true) as SVGSVGElement;
  copy.setAttribute('class', `${className} icon-${name}`);
  return copy;
}
